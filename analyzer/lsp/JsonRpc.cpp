#include "lsp/JsonRpc.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <string_view>

namespace shardlint::lsp {

using nlohmann::json;

namespace {

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// Case-insensitive search for `needle` (lower case) in `hay` from `from`.
size_t ifind(std::string_view hay, size_t from, std::string_view needle) {
  if (hay.size() < needle.size()) return std::string_view::npos;
  for (size_t i = from; i + needle.size() <= hay.size(); ++i) {
    size_t k = 0;
    while (k < needle.size() && std::tolower(static_cast<unsigned char>(hay[i + k])) == needle[k]) ++k;
    if (k == needle.size()) return i;
  }
  return std::string_view::npos;
}

// A character of an HTTP header name (RFC 9110 `tchar`).
bool isTokenChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

std::string printable(std::string_view s) {
  std::string out;
  for (unsigned char c : s.substr(0, 80)) out += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
  if (s.size() > 80) out += "...";
  return out;
}

}  // namespace

void MessageReader::consume(size_t n) {
  pos_ += n;
  if (pos_ >= buf_.size()) {
    buf_.clear();
    pos_ = 0;
  } else if (pos_ > (1u << 20) && pos_ > buf_.size() / 2) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
}

MessageReader::Result MessageReader::parseBuffered() {
  // After a bad header line, skip only its first byte: the resync then finds a `Content-Length`
  // further on in the same line (garbage glued to the front of the next message's header).
  size_t badLine = 0;  // 1 + offset of the bad line from pos_; 0: drop the whole header block
  auto malformed = [&](std::string why) {
    consume(badLine ? badLine : headerEnd_);
    headerEnd_ = 0;
    headerLines_ = 0;
    contentLength_ = -1;
    inBody_ = false;
    resync_ = true;
    Result r;
    r.status = Status::Malformed;
    r.error = std::move(why);
    return r;
  };
  Result wait;
  wait.status = Status::Timeout;
  for (;;) {
    if (resync_) {
      static constexpr std::string_view kKey = "content-length";
      size_t found = ifind(buf_, pos_, kKey);
      if (found == std::string::npos) {
        size_t avail = buf_.size() - pos_;
        size_t keep = std::min(kKey.size() - 1, avail);
        consume(avail - keep);
        return wait;
      }
      consume(found - pos_);
      resync_ = false;
    }
    if (!inBody_) {
      for (;;) {
        size_t lineStart = pos_ + headerEnd_;
        size_t nl = buf_.find('\n', lineStart);
        if (nl == std::string::npos) {
          if (buf_.size() - lineStart > kMaxHeaderLine) {
            badLine = lineStart - pos_ + 1;
            return malformed("header line longer than " + std::to_string(kMaxHeaderLine) + " bytes");
          }
          return wait;
        }
        badLine = lineStart - pos_ + 1;
        std::string_view line(buf_.data() + lineStart, nl - lineStart);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        headerEnd_ = nl + 1 - pos_;
        if (line.empty()) {
          if (headerLines_ == 0) {  // stray blank line between messages
            consume(headerEnd_);
            headerEnd_ = 0;
            continue;
          }
          if (contentLength_ < 0) {
            badLine = 0;
            return malformed("missing Content-Length header");
          }
          consume(headerEnd_);
          headerEnd_ = 0;
          headerLines_ = 0;
          inBody_ = true;
          break;
        }
        ++headerLines_;
        size_t colon = line.find(':');
        if (colon == std::string_view::npos)
          return malformed("malformed header line `" + printable(line) + "` (expected `Name: value`)");
        std::string_view name = trim(line.substr(0, colon)), value = trim(line.substr(colon + 1));
        if (name.empty() || !std::all_of(name.begin(), name.end(), isTokenChar))
          return malformed("malformed header name in `" + printable(line) + "`");
        if (iequals(name, "content-length")) {
          if (value.empty() || value.size() > 10 ||
              !std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; }))
            return malformed("invalid Content-Length `" + printable(value) + "`");
          long long n = std::stoll(std::string(value));
          if (n > static_cast<long long>(kMaxBody))
            return malformed("Content-Length " + std::string(value) + " exceeds the limit of " +
                             std::to_string(kMaxBody) + " bytes");
          if (contentLength_ >= 0 && contentLength_ != n) return malformed("conflicting Content-Length headers");
          contentLength_ = n;
        }
        // Content-Type (and any other header) is tolerated and ignored: the body is UTF-8 JSON.
      }
    }
    size_t need = static_cast<size_t>(contentLength_);
    if (buf_.size() - pos_ < need) return wait;
    Result r;
    r.status = Status::Message;
    r.body.assign(buf_, pos_, need);
    consume(need);
    inBody_ = false;
    contentLength_ = -1;
    return r;
  }
}

MessageReader::Result MessageReader::next(int timeoutMs) {
  for (;;) {
    Result r = parseBuffered();
    if (r.status != Status::Timeout) return r;
    if (eof_) {
      r.status = Status::Eof;
      return r;
    }
    pollfd p{};
    p.fd = fd_;
    p.events = POLLIN;
    int rc = ::poll(&p, 1, timeoutMs);
    if (rc < 0) {
      if (errno == EINTR) continue;
      eof_ = true;
      continue;
    }
    if (rc == 0) return r;  // Timeout
    char chunk[65536];
    ssize_t n = ::read(fd_, chunk, sizeof chunk);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      eof_ = true;
      continue;
    }
    if (n == 0) {
      eof_ = true;
      continue;
    }
    buf_.append(chunk, static_cast<size_t>(n));
  }
}

bool MessageReader::inputPending() {
  // (A complete buffered message is always returned by next() before the caller goes idle.)
  if (eof_) return false;
  pollfd p{};
  p.fd = fd_;
  p.events = POLLIN;
  return ::poll(&p, 1, 0) > 0;
}

bool MessageWriter::sendRaw(const std::string& body) {
  if (broken_) return false;
  std::string out = "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n";
  out += body;
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n = ::write(fd_, out.data() + done, out.size() - done);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      broken_ = true;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

bool MessageWriter::send(const json& message) {
  return sendRaw(message.dump(-1, ' ', false, json::error_handler_t::replace));
}

json makeResponse(const json& id, json result) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
}

json makeError(const json& id, int code, const std::string& message) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", message}}}};
}

json makeNotification(const std::string& method, json params) {
  return {{"jsonrpc", "2.0"}, {"method", method}, {"params", std::move(params)}};
}

json makeRequest(const json& id, const std::string& method, json params) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}};
}

}  // namespace shardlint::lsp
