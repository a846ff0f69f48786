#ifndef RINGMASTER_FUZZ_FUZZ_INPUT_H_
#define RINGMASTER_FUZZ_FUZZ_INPUT_H_

// FuzzInput: reads a fuzzer's bytes as a sequence of small typed values. A
// read past the end yields zeros / empty strings, never an error, so every
// byte string is a valid program for a target. Not thread-safe.
//
// The RPC targets read their input as records:
//   [op: 1 byte][fixups: 1 byte][length: 2 bytes little-endian][payload]
// where op picks the RPC (op % the number of RPCs), fixups picks which of
// the request's ids the harness replaces with live ones, and the payload is
// the request proto's wire format (ParseFromArray; a payload that does not
// parse still sends what was decoded before the error).

#include <cstddef>
#include <cstdint>
#include <string>

namespace ringmaster::fuzz {

class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  bool empty() const { return pos_ >= size_; }
  size_t remaining() const { return size_ - pos_; }

  uint8_t Byte() { return pos_ < size_ ? data_[pos_++] : 0; }

  uint16_t U16() {
    const uint16_t low = Byte();
    return static_cast<uint16_t>(low | (Byte() << 8));
  }

  // At most `n` bytes (fewer at the end of the input).
  std::string Bytes(size_t n) {
    if (n > remaining()) n = remaining();
    std::string out(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return out;
  }

  // A 2-byte length, then that many bytes.
  std::string LengthPrefixed() { return Bytes(U16()); }

  // Everything left.
  std::string Rest() { return Bytes(remaining()); }

 private:
  const uint8_t* const data_;
  const size_t size_;
  size_t pos_ = 0;
};

// One record of an RPC target's input (see above).
struct FuzzCall {
  uint8_t op = 0;
  uint8_t fixups = 0;
  std::string payload;
};

inline FuzzCall NextCall(FuzzInput& in) {
  FuzzCall call;
  call.op = in.Byte();
  call.fixups = in.Byte();
  call.payload = in.LengthPrefixed();
  return call;
}

}  // namespace ringmaster::fuzz

#endif  // RINGMASTER_FUZZ_FUZZ_INPUT_H_
