#include "engine/server/http/http_request_parser.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <utility>

namespace tessera {
namespace {

// RFC 9110 tchar: the characters of a method, a header name or a coding.
bool is_token_char(unsigned char c) {
  return std::isalnum(c) ||
         std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
}

bool is_token(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return is_token_char(static_cast<unsigned char>(c));
  });
}

// A field value's bytes: visible characters, obs-text, space and tab; no other controls.
bool is_field_value(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char ch) {
    const unsigned char c = static_cast<unsigned char>(ch);
    return c == '\t' || (c >= 0x20 && c != 0x7f);
  });
}

std::string lowercase(std::string_view text) {
  std::string result(text);
  for (char& c : result) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return result;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

// The comma-separated elements of a list header, trimmed, empty ones dropped (RFC 9110 5.6.1).
std::vector<std::string> list_elements(std::string_view value) {
  std::vector<std::string> elements;
  while (!value.empty()) {
    const size_t comma = value.find(',');
    std::string_view element = trim(value.substr(0, comma));
    if (!element.empty()) elements.push_back(lowercase(element));
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return elements;
}

// Decimal digits only, at most 18 of them (no sign, no overflow): a Content-Length.
bool parse_length(std::string_view text, uint64_t& value) {
  if (text.empty() || text.size() > 18) return false;
  value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<uint64_t>(c - '0');
  }
  return true;
}

// A chunk size: 1 to 15 hex digits, so that it cannot overflow.
bool parse_chunk_size(std::string_view text, uint64_t& value) {
  if (text.empty() || text.size() > 15) return false;
  value = 0;
  for (char c : text) {
    const int digit = std::isdigit(static_cast<unsigned char>(c)) ? c - '0'
                      : (c >= 'a' && c <= 'f')                    ? c - 'a' + 10
                      : (c >= 'A' && c <= 'F')                    ? c - 'A' + 10
                                                                  : -1;
    if (digit < 0) return false;
    value = value * 16 + static_cast<uint64_t>(digit);
  }
  return true;
}

// A CR not followed by LF, or an LF not preceded by CR, in text[from, end).
bool has_bare_line_break(std::string_view text, size_t from) {
  for (size_t i = from; i < text.size(); ++i) {
    if (text[i] == '\n' && (i == 0 || text[i - 1] != '\r')) return true;
    if (text[i] == '\r' && i + 1 < text.size() && text[i + 1] != '\n') return true;
  }
  return false;
}

}  // namespace

const std::string* HttpRequest::header(std::string_view lowercase_name) const {
  for (const auto& [name, value] : headers)
    if (name == lowercase_name) return &value;
  return nullptr;
}

size_t HttpRequest::header_count(std::string_view lowercase_name) const {
  return static_cast<size_t>(std::count_if(headers.begin(), headers.end(), [&](const auto& field) {
    return field.first == lowercase_name;
  }));
}

HttpRequestParser::State HttpRequestParser::feed(std::string_view bytes) {
  if (state_ == State::failed) return state_;
  buffer_.append(bytes);
  return state_ = parse();
}

bool HttpRequestParser::take_continue_request() {
  const bool asked = expect_continue_ && head_done_ && state_ == State::need_more;
  expect_continue_ = false;
  return asked;
}

HttpRequest HttpRequestParser::take_request() {
  HttpRequest request = std::move(request_);
  request_ = HttpRequest();
  head_done_ = false;
  expect_continue_ = false;
  chunked_ = false;
  content_length_ = 0;
  chunk_state_ = ChunkState::size;
  scanned_ = 0;
  state_ = State::need_more;
  state_ = parse();
  return request;
}

HttpRequestParser::State HttpRequestParser::fail(int status, std::string message) {
  error_ = {status, std::move(message)};
  buffer_ = std::string();
  return State::failed;
}

HttpRequestParser::State HttpRequestParser::parse() {
  if (state_ == State::failed) return state_;
  if (!head_done_) {
    // Empty lines before a request line are ignored (RFC 9112 2.2).
    size_t skip = 0;
    while (buffer_.compare(skip, 2, "\r\n") == 0) skip += 2;
    if (skip > 0) buffer_.erase(0, skip);
    const size_t end = buffer_.find("\r\n\r\n", scanned_ > 3 ? scanned_ - 3 : 0);
    // Only the head: body bytes that came with it may hold any line breaks.
    const size_t head_bytes = end == std::string::npos ? buffer_.size() : end + 4;
    if (has_bare_line_break(std::string_view(buffer_).substr(0, head_bytes),
                            scanned_ > 0 ? scanned_ - 1 : 0))
      return fail(400, "a bare CR or LF in the request head: lines end with CRLF");
    if (end == std::string::npos) {
      if (buffer_.size() > limits_.max_head_bytes)
        return fail(431, fmt::format("the request line and headers exceed {} bytes",
                                     limits_.max_head_bytes));
      scanned_ = buffer_.size();
      return State::need_more;
    }
    if (end + 4 > limits_.max_head_bytes)
      return fail(
          431, fmt::format("the request line and headers exceed {} bytes", limits_.max_head_bytes));
    if (!parse_head(std::string_view(buffer_).substr(0, end + 2))) return State::failed;
    buffer_.erase(0, end + 4);
    head_done_ = true;
  }
  if (chunked_) return parse_chunked() ? State::complete : state_;
  if (buffer_.size() < content_length_) return State::need_more;
  if (buffer_.size() == content_length_) {
    request_.body = std::exchange(buffer_, std::string());  // the usual case: moved, not copied
  } else {
    request_.body = buffer_.substr(0, content_length_);
    buffer_.erase(0, content_length_);
    // The connection stays open: it keeps no body-sized buffer for its next request.
    if (buffer_.capacity() > limits_.max_head_bytes) buffer_.shrink_to_fit();
  }
  return State::complete;
}

bool HttpRequestParser::parse_head(std::string_view head) {
  const size_t line_end = head.find("\r\n");
  const std::string_view line = head.substr(0, line_end);
  const size_t first_space = line.find(' ');
  const size_t second_space =
      first_space == std::string_view::npos ? first_space : line.find(' ', first_space + 1);
  if (second_space == std::string_view::npos || line.find(' ', second_space + 1) != line.npos) {
    state_ = fail(400, "the request line is not 'METHOD TARGET HTTP/1.1'");
    return false;
  }
  request_.method = std::string(line.substr(0, first_space));
  request_.target = std::string(line.substr(first_space + 1, second_space - first_space - 1));
  const std::string_view version = line.substr(second_space + 1);
  if (!is_token(request_.method)) {
    state_ = fail(400, "the request method is not a token");
    return false;
  }
  if (request_.target.empty() || request_.target[0] != '/' ||
      !std::all_of(request_.target.begin(), request_.target.end(),
                   [](char c) { return c > 0x20 && c < 0x7f; })) {
    state_ = fail(400,
                  "the request target must be a path starting with '/', without spaces or "
                  "control characters");
    return false;
  }
  request_.path = request_.target.substr(0, request_.target.find('?'));
  if (version == "HTTP/1.1") {
    request_.minor_version = 1;
  } else if (version == "HTTP/1.0") {
    request_.minor_version = 0;
  } else if (version.starts_with("HTTP/") && version.size() == 8 && version[6] == '.') {
    state_ = fail(505, "only HTTP/1.0 and HTTP/1.1 are served");
    return false;
  } else {
    state_ = fail(400, "the request line does not end with an HTTP version");
    return false;
  }

  std::string_view rest = head.substr(line_end + 2);
  while (!rest.empty()) {
    const size_t end = rest.find("\r\n");
    const std::string_view field = rest.substr(0, end);
    rest.remove_prefix(end + 2);
    if (field.front() == ' ' || field.front() == '\t') {
      state_ = fail(400, "obsolete line folding in a header is not accepted");
      return false;
    }
    const size_t colon = field.find(':');
    if (colon == std::string_view::npos || !is_token(field.substr(0, colon))) {
      state_ = fail(400, "a header line is not 'Name: value' (no space before the colon)");
      return false;
    }
    const std::string_view value = trim(field.substr(colon + 1));
    if (!is_field_value(value)) {
      state_ =
          fail(400, fmt::format("the header {} holds a control character", field.substr(0, colon)));
      return false;
    }
    if (request_.headers.size() == limits_.max_headers) {
      state_ = fail(431, fmt::format("more than {} headers", limits_.max_headers));
      return false;
    }
    request_.headers.emplace_back(lowercase(field.substr(0, colon)), std::string(value));
  }

  if (request_.minor_version == 1 && request_.header_count("host") != 1) {
    state_ = fail(400, "an HTTP/1.1 request needs exactly one Host header");
    return false;
  }
  std::vector<std::string> connection;
  std::vector<std::string> transfer_codings;
  std::vector<std::string> lengths;
  for (const auto& [name, value] : request_.headers) {
    std::vector<std::string>* list = name == "connection"          ? &connection
                                     : name == "transfer-encoding" ? &transfer_codings
                                     : name == "content-length"    ? &lengths
                                                                   : nullptr;
    if (list == nullptr) continue;
    std::vector<std::string> elements = list_elements(value);
    if (elements.empty() && list != &connection) {
      state_ = fail(400, fmt::format("an empty {} header", name));
      return false;
    }
    list->insert(list->end(), elements.begin(), elements.end());
  }
  const bool close = std::find(connection.begin(), connection.end(), "close") != connection.end();
  const bool keep =
      std::find(connection.begin(), connection.end(), "keep-alive") != connection.end();
  request_.keep_alive = request_.minor_version == 1 ? !close : keep && !close;

  if (!transfer_codings.empty()) {
    if (!lengths.empty()) {
      state_ = fail(400, "Content-Length and Transfer-Encoding together: send one of them");
      return false;
    }
    if (request_.minor_version == 0) {
      state_ = fail(400, "Transfer-Encoding in an HTTP/1.0 request");
      return false;
    }
    for (const std::string& coding : transfer_codings)
      if (coding != "chunked") {
        state_ = fail(501, fmt::format("the transfer coding '{}' is not supported: send the body "
                                       "as is, with Content-Length, or chunked",
                                       coding));
        return false;
      }
    if (transfer_codings.size() != 1) {
      state_ = fail(400, "the chunked transfer coding is applied more than once");
      return false;
    }
    chunked_ = true;
  } else if (!lengths.empty()) {
    for (const std::string& length : lengths)
      if (length != lengths.front() || !parse_length(length, content_length_)) {
        state_ = fail(400, lengths.size() > 1 && length != lengths.front()
                               ? "conflicting Content-Length values"
                               : "Content-Length is not a decimal number of bytes");
        return false;
      }
    if (content_length_ > limits_.max_body_bytes) {
      state_ = fail(413, fmt::format("the request body ({} bytes) is larger than the {} bytes the "
                                     "server accepts",
                                     content_length_, limits_.max_body_bytes));
      return false;
    }
  }
  if (const std::string* coding = request_.header("content-encoding")) {
    for (const std::string& element : list_elements(*coding))
      if (element != "identity") {
        state_ = fail(415, fmt::format("the content coding '{}' is not supported: send the body "
                                       "uncompressed",
                                       element));
        return false;
      }
  }
  if (const std::string* expect = request_.header("expect")) {
    if (lowercase(*expect) != "100-continue") {
      state_ = fail(417, "the only expectation served is 100-continue");
      return false;
    }
    expect_continue_ = chunked_ || content_length_ > 0;
  }
  return true;
}

bool HttpRequestParser::parse_chunked() {
  constexpr size_t max_line = 1024;  // a chunk-size line with extensions, or a trailer line
  while (true) {
    if (chunk_state_ == ChunkState::data) {
      const size_t take = static_cast<size_t>(std::min<uint64_t>(chunk_left_, buffer_.size()));
      request_.body.append(buffer_, 0, take);
      buffer_.erase(0, take);
      chunk_left_ -= take;
      if (chunk_left_ > 0) return false;
      chunk_state_ = ChunkState::data_end;
      continue;
    }
    if (chunk_state_ == ChunkState::data_end) {
      if (buffer_.size() < 2) return false;
      if (buffer_.compare(0, 2, "\r\n") != 0) {
        state_ = fail(400, "a chunk's data is not followed by CRLF");
        return false;
      }
      buffer_.erase(0, 2);
      chunk_state_ = ChunkState::size;
      continue;
    }
    const size_t end = buffer_.find("\r\n");
    if (end == std::string::npos) {
      if (buffer_.size() > max_line) state_ = fail(400, "a chunk line longer than 1024 bytes");
      return false;
    }
    const std::string line = buffer_.substr(0, end);
    buffer_.erase(0, end + 2);
    if (end > max_line || has_bare_line_break(line, 0) || !is_field_value(line)) {
      state_ = fail(400, "a malformed chunk line");
      return false;
    }
    if (chunk_state_ == ChunkState::trailer) {
      if (line.empty()) return true;  // trailer fields are read and dropped
      continue;
    }
    uint64_t size = 0;
    if (!parse_chunk_size(std::string_view(line).substr(0, line.find(';')), size)) {
      state_ = fail(400, "a chunk size is not a hexadecimal number");
      return false;
    }
    if (size > limits_.max_body_bytes - request_.body.size()) {
      state_ = fail(413, fmt::format("the request body is larger than the {} bytes the server "
                                     "accepts",
                                     limits_.max_body_bytes));
      return false;
    }
    chunk_left_ = size;
    chunk_state_ = size == 0 ? ChunkState::trailer : ChunkState::data;
  }
}

}  // namespace tessera
