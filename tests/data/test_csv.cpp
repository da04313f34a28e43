#include <gtest/gtest.h>

#include <fstream>

#include "ember/data/csv.h"
#include "test_util.h"

namespace ember::testing {
namespace {

TEST(Csv, ReadsQuotedFieldsLineBreaksAndCrlf) {
  const std::string text =
      "sentiment,confidence,text\r\n"
      "negative,0.75,plain text\r\n"
      "positive,1,\"a, comma and \"\"quotes\"\"\"\r\n"
      "\n"  // a blank line is no record
      "neutral,0.5,\"two\nlines\"\n"
      "neutral,,\xd1 latin-1 byte";  // no final line break; bytes pass through
  data::CsvTable t = data::parse_csv(text, "mem.csv");
  EXPECT_EQ(t.header, (std::vector<std::string>{"sentiment", "confidence", "text"}));
  ASSERT_EQ(t.rows.size(), 4u);
  EXPECT_EQ(t.rows[0][2], "plain text");
  EXPECT_EQ(t.rows[1][2], "a, comma and \"quotes\"");
  EXPECT_EQ(t.rows[2][2], "two\nlines");
  EXPECT_EQ(t.rows[3][1], "");
  EXPECT_EQ(t.rows[3][2], "\xd1 latin-1 byte");
  EXPECT_EQ(t.lines, (std::vector<int64_t>{2, 3, 5, 7}));
  EXPECT_EQ(t.column("text"), 2u);
  EXPECT_EMBER_ERROR(t.column("label"), "mem.csv has no column \"label\"", "sentiment, confidence, text");
}

TEST(Csv, BadFilesNameTheLine) {
  EXPECT_EMBER_ERROR(data::parse_csv("a,b\n1,2\n3\n", "f.csv"), "f.csv:3: 1 fields, but the header has 2");
  EXPECT_EMBER_ERROR(data::parse_csv("a,b\n1,\"open\n\n", "f.csv"),
                     "f.csv:2: a quoted field is never closed");
  EXPECT_EMBER_ERROR(data::parse_csv("a,b\n1,x\"y\n", "f.csv"), "f.csv:2: a quote inside an unquoted field");
  EXPECT_EMBER_ERROR(data::parse_csv("a,b\n1,\"x\"y\n", "f.csv"), "f.csv:2: text after a closing quote");
  EXPECT_EMBER_ERROR(data::parse_csv("", "f.csv"), "f.csv is empty");
  EXPECT_EMBER_ERROR(data::read_csv("/no/such/file.csv"), "cannot open /no/such/file.csv");
}

TEST(Csv, ReadsAFile) {
  TempDir dir;
  std::ofstream(dir.file("t.csv"), std::ios::binary) << "x,y\n1,2\n";
  data::CsvTable t = data::read_csv(dir.file("t.csv"));
  EXPECT_EQ(t.rows, (std::vector<std::vector<std::string>>{{"1", "2"}}));
  EXPECT_EQ(t.path, dir.file("t.csv"));
}

}  // namespace
}  // namespace ember::testing
