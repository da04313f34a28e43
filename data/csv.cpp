#include "ember/data/csv.h"

#include <fstream>
#include <sstream>

#include "ember/core/error.h"

namespace ember::data {

size_t CsvTable::column(const std::string& name) const {
  for (size_t i = 0; i < header.size(); ++i)
    if (header[i] == name) return i;
  std::string names;
  for (const std::string& h : header) names += (names.empty() ? "" : ", ") + h;
  throw Error("read_csv: " + path + " has no column \"" + name + "\" (its columns: " + names + ")");
}

CsvTable parse_csv(const std::string& text, const std::string& name) {
  CsvTable t;
  t.path = name;
  std::vector<std::string> record;
  std::string field;
  int64_t line = 1, record_line = 1;
  bool quoted = false, was_quoted = false, any = false;
  auto end_field = [&] {
    record.push_back(std::move(field));
    field.clear();
    was_quoted = false;
  };
  auto end_record = [&] {
    end_field();
    if (t.header.empty()) {
      t.header = std::move(record);
    } else {
      EMBER_CHECK(record.size() == t.header.size(), "read_csv: ", name, ":", record_line, ": ", record.size(),
                  " fields, but the header has ", t.header.size());
      t.rows.push_back(std::move(record));
      t.lines.push_back(record_line);
    }
    record.clear();
    any = false;
  };
  const size_t n = text.size();
  for (size_t i = 0; i < n; ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < n && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
        was_quoted = true;
      } else {
        if (c == '\n') ++line;
        field += c;
      }
      continue;
    }
    if (c == '"') {
      EMBER_CHECK(field.empty() && !was_quoted, "read_csv: ", name, ":", line,
                  ": a quote inside an unquoted field (quote the whole field, doubling inner quotes)");
      quoted = true;
      any = true;
    } else if (c == ',') {
      end_field();
      any = true;
    } else if (c == '\n' || (c == '\r' && i + 1 < n && text[i + 1] == '\n')) {
      if (c == '\r') ++i;
      if (any || !field.empty() || !record.empty()) end_record();
      record_line = ++line;
    } else {
      EMBER_CHECK(!was_quoted, "read_csv: ", name, ":", line, ": text after a closing quote");
      field += c;
      any = true;
    }
  }
  EMBER_CHECK(!quoted, "read_csv: ", name, ":", record_line, ": a quoted field is never closed");
  if (any || !field.empty() || !record.empty()) end_record();
  EMBER_CHECK(!t.header.empty(), "read_csv: ", name, " is empty");
  return t;
}

CsvTable read_csv(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EMBER_CHECK(in, "read_csv: cannot open ", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  EMBER_CHECK(!in.bad(), "read_csv: reading ", path, " failed");
  return parse_csv(ss.str(), path);
}

}  // namespace ember::data
