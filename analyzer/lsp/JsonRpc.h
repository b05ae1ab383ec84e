// JSON-RPC 2.0 over a byte stream with LSP base-protocol framing
// (`Content-Length: N\r\n` [`Content-Type: ...\r\n`] `\r\n` then N bytes of JSON).
#pragma once
#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

namespace shardlint::lsp {

// Standard and LSP error codes.
enum ErrorCode : int {
  kParseError = -32700,
  kInvalidRequest = -32600,
  kMethodNotFound = -32601,
  kInvalidParams = -32602,
  kInternalError = -32603,
  kServerNotInitialized = -32002,
  kRequestCancelled = -32800,  // the client sent `$/cancelRequest` before the server started on it
  kContentModified = -32801,   // a newer change to the document arrived: the result would be stale
  kRequestFailed = -32803,
};

// Reads framed messages from a file descriptor. A malformed header is reported once;
// the reader then skips ahead to the next `Content-Length` (case-insensitive).
class MessageReader {
 public:
  explicit MessageReader(int fd) : fd_(fd) {}

  enum class Status { Message, Malformed, Eof, Timeout };
  struct Result {
    Status status = Status::Eof;
    std::string body;   // Message: the JSON text
    std::string error;  // Malformed: what was wrong
  };
  // The next message; waits at most `timeoutMs` for input (-1: no limit, 0: only what is buffered
  // or readable now).
  Result next(int timeoutMs);
  // True when more input is readable now (does not block).
  bool inputPending();

  // Limits: a header line longer than 8 KiB, or a Content-Length above 256 MiB, is a parse
  // error (-32700, id null) reported at once, before any of the body is stored; the reader then
  // skips input up to the next `Content-Length`, keeping only a few bytes of it. So the
  // server's input buffer never holds more than one message of at most 256 MiB plus one read.
  static constexpr size_t kMaxHeaderLine = 8192;
  static constexpr size_t kMaxBody = 256u * 1024u * 1024u;

 private:
  // Tries to cut a message out of the buffer; Timeout means "need more bytes".
  Result parseBuffered();
  void consume(size_t n);
  int fd_;
  bool eof_ = false;
  std::string buf_;
  size_t pos_ = 0;              // start of unparsed bytes in buf_
  bool resync_ = false;         // skipping to the next `Content-Length`
  size_t headerEnd_ = 0;        // bytes of the header block parsed so far (from pos_)
  int headerLines_ = 0;         // header lines seen in the current block
  long long contentLength_ = -1;
  bool inBody_ = false;         // headers done, waiting for contentLength_ bytes
};

// Writes framed messages to a file descriptor (blocking, whole messages).
class MessageWriter {
 public:
  explicit MessageWriter(int fd) : fd_(fd) {}
  // False when the peer is gone.
  bool send(const nlohmann::json& message);
  bool sendRaw(const std::string& body);

 private:
  int fd_;
  bool broken_ = false;
};

nlohmann::json makeResponse(const nlohmann::json& id, nlohmann::json result);
nlohmann::json makeError(const nlohmann::json& id, int code, const std::string& message);
nlohmann::json makeNotification(const std::string& method, nlohmann::json params);
nlohmann::json makeRequest(const nlohmann::json& id, const std::string& method, nlohmann::json params);

}  // namespace shardlint::lsp
