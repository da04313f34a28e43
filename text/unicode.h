#pragma once

// The Python character queries Hugging Face's tokenizer is written in, answered by utf8proc
// (text/utf8proc/) or, in a build without it, by a stub whose every call throws
// (text/no_utf8proc/). Inputs are valid code points (decode_utf8's output).

#include <string>
#include <string_view>

namespace ember::text {

bool has_utf8proc();

// unicodedata.category(c): "Lu", "Mn", "Zs", "Cn", ...
std::string_view general_category(char32_t c);

// str.isspace(): category Zs, or bidirectional class WS, B or S (so U+2028, U+001F are spaces).
bool is_space(char32_t c);

// unicodedata.normalize("NFC" / "NFD", text).
std::u32string nfc(std::u32string_view text);
std::u32string nfd(std::u32string_view text);

// str.lower(): the full lower-case mapping (U+0130 becomes "i" + U+0307) with the Final_Sigma
// rule (a capital sigma ending a word becomes U+03C2).
std::u32string lower(std::u32string_view text);

}  // namespace ember::text
