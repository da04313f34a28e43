#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ember::data {

// A CSV file as RFC 4180 writes it: fields separated by commas; a field in double quotes may hold
// commas, line breaks and quotes (doubled); records end with CRLF or LF. Bytes pass through as
// they are (invalid UTF-8 included: the tokenizer replaces it).
struct CsvTable {
  std::vector<std::string> header;             // the first record
  std::vector<std::vector<std::string>> rows;  // the others, each with header.size() fields
  std::vector<int64_t> lines;                  // the line each row starts on (1-based)
  // The index of the column named `name`; an error naming the file and its columns otherwise.
  size_t column(const std::string& name) const;
  std::string path;
};

// Reads `path`; errors name the file and line: an unreadable file, an empty one, a quote left
// open, a quote inside an unquoted field, a record with another number of fields than the header.
CsvTable read_csv(const std::string& path);

// The same for text already in memory; `name` stands for the file in errors.
CsvTable parse_csv(const std::string& text, const std::string& name);

}  // namespace ember::data
