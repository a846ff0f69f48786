#ifndef RINGMASTER_FUZZ_FUZZ_INPUT_H_
#define RINGMASTER_FUZZ_FUZZ_INPUT_H_

// FuzzInput: reads a fuzzer's bytes as a sequence of small typed values. A
// read past the end yields zeros / empty strings, never an error, so every
// byte string is a valid program for a target. Not thread-safe.
//
// The RPC targets read their input as records:
//   [op: 1 byte][fixups: 1 byte]([target: 1 byte][amount: 3 bytes LE])?
//   [length: 2 bytes little-endian][payload]
// where op picks the RPC ((op & 0x7f) % the number of RPCs), fixups picks
// which of the request's ids the harness replaces with live ones, and the
// payload is the request proto's wire format (MergeFromString; a payload
// that does not parse still sends what was decoded before the error).
// When op has bit 7 (kInflateOp) set, four more bytes follow fixups: an
// Inflation. The decoded request (each message, for a stream) then has one
// field, picked by `target`, grown by `amount` entries or to `amount`
// bytes (fuzz/inflate.h): a record of a few bytes becomes a request of up
// to 16 MiB (70,000 labels, an 8 MiB path). What one input may add in all
// is kMaxInflatedBytesPerInput; once spent, later inflations add nothing.

#include <cstddef>
#include <cstdint>
#include <string>

namespace ringmaster::fuzz {

// The op bit that says an Inflation follows fixups.
inline constexpr uint8_t kInflateOp = 0x80;
// What the inflations of one input may add in all: the suite stays fast,
// and requests stay under the gRPC message limit (32 MiB).
inline constexpr size_t kMaxInflatedBytesPerInput = size_t{16} << 20;

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

  uint32_t U24() {
    const uint32_t low = U16();
    return low | (static_cast<uint32_t>(Byte()) << 16);
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

  // Bytes inflations of this input may still add (see above).
  size_t* inflate_budget() { return &inflate_budget_; }

 private:
  const uint8_t* const data_;
  const size_t size_;
  size_t pos_ = 0;
  size_t inflate_budget_ = kMaxInflatedBytesPerInput;
};

// How a record's request grows (fuzz/inflate.h): [target][amount: u24 LE].
struct Inflation {
  bool enabled = false;
  uint8_t target = 0;   // which inflatable field: target % their number
  uint32_t amount = 0;  // entries added to a repeated field, or a string's length in bytes
};

inline Inflation NextInflation(FuzzInput& in) {
  Inflation inflation;
  inflation.enabled = true;
  inflation.target = in.Byte();
  inflation.amount = in.U24();
  return inflation;
}

// One record of an RPC target's input (see above).
struct FuzzCall {
  uint8_t op = 0;  // without kInflateOp
  uint8_t fixups = 0;
  Inflation inflation;
  size_t* inflate_budget = nullptr;  // the input's (FuzzInput::inflate_budget)
  std::string payload;
};

inline FuzzCall NextCall(FuzzInput& in) {
  FuzzCall call;
  const uint8_t op = in.Byte();
  call.op = op & ~kInflateOp;
  call.fixups = in.Byte();
  if ((op & kInflateOp) != 0) call.inflation = NextInflation(in);
  call.inflate_budget = in.inflate_budget();
  call.payload = in.LengthPrefixed();
  return call;
}

}  // namespace ringmaster::fuzz

#endif  // RINGMASTER_FUZZ_FUZZ_INPUT_H_
