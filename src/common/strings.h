// Small string helpers shared by the config validator and the CLI.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mmserve {

size_t EditDistance(std::string_view a, std::string_view b);
// The candidate closest to `word` if it is close enough to be a likely typo, else "".
std::string ClosestMatch(std::string_view word, const std::vector<std::string>& candidates);
std::string Join(const std::vector<std::string>& parts, std::string_view separator);
// Byte counts for people: "3686.4 MiB" (one decimal) and "4 MiB" (rounded to whole MiB).
std::string FormatMib(int64_t bytes);
std::string FormatWholeMib(int64_t bytes);
// Standard base64 (RFC 4648 §4, with padding).
std::string Base64Encode(std::string_view bytes);
// The bytes standard base64 (RFC 4648 §4) `text` encodes, padded or not; nullopt for anything
// else: another character, whitespace, a stray '=', a length no encoding has, or leftover bits
// that are not zero (each byte string has one encoding). Linear in the text.
std::optional<std::string> Base64Decode(std::string_view text);

// Strict UTF-8 (no overlong forms, surrogates or code points past U+10FFFF).
bool IsValidUtf8(std::string_view text);
// `text` with every byte that is not part of valid UTF-8 replaced by U+FFFD: for text that
// leaves the server in a protocol that requires UTF-8 (JSON, protobuf strings).
std::string ToValidUtf8(std::string_view text);
// At most `max_chars` bytes of `text` (cut on a character boundary), with "..." when cut: for
// quoting client or file input in a message without echoing all of it.
std::string Abbreviate(std::string_view text, size_t max_chars = 40);
// `text` with its control characters escaped: C0 bytes and DEL as \n, \r, \t or \xNN, and the
// UTF-8 C1 controls (U+0080..U+009F) as \u0080..\u009f. For text that reaches a log line or a
// terminal: a raw newline forges a line, an escape sequence takes the terminal over.
std::string EscapeControl(std::string_view text);
// A signal's name as `kill -l` spells it with its prefix: "SIGSEGV"; "signal 77" when unknown.
std::string SignalName(int signal);
// A whole decimal integer ("-12", "+7"; no spaces, no other characters) that fits in int64_t,
// else nullopt. Linear, no locale, no exceptions.
std::optional<int64_t> ParseInt64(std::string_view text);
// a × b, or nullopt when it would overflow.
std::optional<int64_t> CheckedMul(int64_t a, int64_t b);

}  // namespace mmserve
