#pragma once

// JSON string literals for the files ember writes by hand (metrics logs, profiler traces).
#include <string>
#include <string_view>

namespace ember {

// Appends s to out as a JSON string: quoted, with quotes, backslashes and control characters
// escaped (bytes above 0x7f pass through: UTF-8 stays UTF-8).
void append_json_string(std::string& out, std::string_view s);

}  // namespace ember
