#include "engine/checkpoint/safetensors.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "common/json.h"
#include "common/utf8.h"

namespace ringmaster::engine {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors data is little-endian");

constexpr char kMetadataKey[] = "__metadata__";
// The limit the reference implementation applies (100 MB).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr SafetensorsDType kAllDTypes[] = {SafetensorsDType::kF32, SafetensorsDType::kF16, SafetensorsDType::kBF16,
                                           SafetensorsDType::kI32, SafetensorsDType::kI64};

// Element count of `shape`, or false if it overflows 2^63.
bool CountElements(const Shape& shape, uint64_t* count) {
  *count = 1;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(*count, static_cast<uint64_t>(d), count) || *count > (1ULL << 62)) {
      return false;
    }
  }
  return true;
}

absl::Status Corrupt(absl::string_view name, absl::string_view what) {
  return absl::DataLossError(absl::StrCat(name, ": ", what));
}

// A tensor entry of the header, before its offsets are checked against the others.
struct Entry {
  SafetensorsView view;
  uint64_t begin = 0;
  uint64_t end = 0;
};

using Json = nlohmann::ordered_json;

// `s` (valid UTF-8: it came from the parser, or was checked) quoted for a message.
std::string Quoted(const std::string& s) { return Json(s).dump(-1, ' ', false, Json::error_handler_t::replace); }

absl::StatusOr<uint64_t> NonNegativeInteger(const Json& value) {
  if (!value.is_number_integer() || (value.is_number_integer() && !value.is_number_unsigned() && value.get<int64_t>() < 0)) {
    return absl::InvalidArgumentError("not a non-negative integer");
  }
  return value.get<uint64_t>();
}

// Parses one `"name": {"dtype": ..., "shape": [...], "data_offsets": [b, e]}`.
absl::StatusOr<Entry> ParseEntry(absl::string_view file, const std::string& key, const Json& value) {
  const std::string where = absl::StrFormat("tensor %s", Quoted(key));
  if (!value.is_object() || value.size() != 3 || !value.contains("dtype") || !value.contains("shape") ||
      !value.contains("data_offsets")) {
    return Corrupt(file, where + " must be an object with exactly \"dtype\", \"shape\" and \"data_offsets\"");
  }
  const Json& dtype = value["dtype"];
  const Json& shape = value["shape"];
  const Json& offsets = value["data_offsets"];
  Entry entry;
  entry.view.name = key;
  bool known = false;
  for (SafetensorsDType t : kAllDTypes) {
    if (dtype.is_string() && dtype.get<std::string>() == SafetensorsDTypeName(t)) {
      entry.view.dtype = t;
      known = true;
    }
  }
  if (!known) {
    return Corrupt(file, where + ": dtype is not one of F32, F16, BF16, I32, I64");
  }
  if (!shape.is_array()) return Corrupt(file, where + ": shape is not an array");
  for (const Json& d : shape) {
    absl::StatusOr<uint64_t> dim = NonNegativeInteger(d);
    if (!dim.ok() || *dim > static_cast<uint64_t>(INT64_MAX)) {
      return Corrupt(file, where + ": shape is not an array of non-negative integers");
    }
    entry.view.shape.push_back(static_cast<int64_t>(*dim));
  }
  if (!offsets.is_array() || offsets.size() != 2) {
    return Corrupt(file, where + ": data_offsets is not [begin, end]");
  }
  absl::StatusOr<uint64_t> begin = NonNegativeInteger(offsets[0]);
  absl::StatusOr<uint64_t> end = NonNegativeInteger(offsets[1]);
  if (!begin.ok() || !end.ok() || *begin > *end) {
    return Corrupt(file, where + ": data_offsets is not [begin, end] with 0 <= begin <= end");
  }
  entry.begin = *begin;
  entry.end = *end;
  uint64_t count;
  if (!CountElements(entry.view.shape, &count)) return Corrupt(file, where + ": shape is too large");
  const uint64_t need = count * SafetensorsDTypeSize(entry.view.dtype);
  if (entry.end - entry.begin != need) {
    return Corrupt(file, absl::StrFormat("%s: %s %s needs %d bytes, data_offsets [%d, %d] hold %d", where,
                                         SafetensorsDTypeName(entry.view.dtype), ShapeString(entry.view.shape), need,
                                         entry.begin, entry.end, entry.end - entry.begin));
  }
  return entry;
}

absl::Status ParseMetadata(absl::string_view file, const Json& value, SafetensorsMetadata* metadata) {
  if (!value.is_object()) return Corrupt(file, "__metadata__ is not an object");
  for (const auto& [key, item] : value.items()) {
    if (!item.is_string()) {
      return Corrupt(file, absl::StrFormat("__metadata__ value of %s is not a string", Quoted(key)));
    }
    (*metadata)[key] = item.get<std::string>();
  }
  return absl::OkStatus();
}

}  // namespace

const char* SafetensorsDTypeName(SafetensorsDType dtype) {
  switch (dtype) {
    case SafetensorsDType::kF32:
      return "F32";
    case SafetensorsDType::kF16:
      return "F16";
    case SafetensorsDType::kBF16:
      return "BF16";
    case SafetensorsDType::kI32:
      return "I32";
    case SafetensorsDType::kI64:
      return "I64";
  }
  return "?";
}

size_t SafetensorsDTypeSize(SafetensorsDType dtype) {
  switch (dtype) {
    case SafetensorsDType::kF16:
    case SafetensorsDType::kBF16:
      return 2;
    case SafetensorsDType::kF32:
    case SafetensorsDType::kI32:
      return 4;
    case SafetensorsDType::kI64:
      return 8;
  }
  return 0;
}

absl::StatusOr<SafetensorsView> ViewOf(const std::string& name, const Tensor& tensor) {
  if (!tensor.defined()) return absl::InvalidArgumentError(absl::StrFormat("tensor \"%s\" is undefined", name));
  if (tensor.device() != Device::kCpu) {
    return absl::InvalidArgumentError(
        absl::StrFormat("tensor \"%s\" is on %s; copy it to the host first", name, DeviceName(tensor.device())));
  }
  SafetensorsView view;
  view.name = name;
  switch (tensor.dtype()) {
    case DType::kF32:
      view.dtype = SafetensorsDType::kF32;
      break;
    case DType::kF16:
      view.dtype = SafetensorsDType::kF16;
      break;
    case DType::kBF16:
      view.dtype = SafetensorsDType::kBF16;
      break;
    case DType::kI32:
      view.dtype = SafetensorsDType::kI32;
      break;
  }
  view.shape = tensor.shape();
  view.data = absl::string_view(static_cast<const char*>(tensor.raw()), tensor.bytes());
  return view;
}

absl::StatusOr<Tensor> ToTensor(const SafetensorsView& view) {
  DType dtype;
  switch (view.dtype) {
    case SafetensorsDType::kF32:
      dtype = DType::kF32;
      break;
    case SafetensorsDType::kF16:
      dtype = DType::kF16;
      break;
    case SafetensorsDType::kBF16:
      dtype = DType::kBF16;
      break;
    case SafetensorsDType::kI32:
      dtype = DType::kI32;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrFormat("tensor \"%s\" has dtype %s, which Tensor cannot hold",
                                                        view.name, SafetensorsDTypeName(view.dtype)));
  }
  Tensor tensor = Tensor::Empty(view.shape, dtype);
  if (tensor.bytes() != view.data.size()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("tensor \"%s\": %d bytes for %s", view.name, view.data.size(), ShapeString(view.shape)));
  }
  if (!view.data.empty()) std::memcpy(tensor.raw(), view.data.data(), view.data.size());
  return tensor;
}

absl::StatusOr<SafetensorsLayout> LayOutSafetensors(const std::vector<SafetensorsView>& tensors,
                                                    const SafetensorsMetadata& metadata) {
  SafetensorsLayout layout;
  std::set<absl::string_view> names;
  for (const SafetensorsView& view : tensors) {
    if (view.name.empty() || !IsValidUtf8(view.name)) {
      return absl::InvalidArgumentError("a tensor name is empty or not UTF-8");
    }
    if (view.name == kMetadataKey || !names.insert(view.name).second) {
      return absl::InvalidArgumentError(
          absl::StrFormat("tensor name %s is reserved or repeated", Quoted(view.name)));
    }
    uint64_t count;
    if (!CountElements(view.shape, &count) || count * SafetensorsDTypeSize(view.dtype) != view.data.size()) {
      return absl::InvalidArgumentError(absl::StrFormat("tensor \"%s\": %d bytes do not make %s %s", view.name,
                                                        view.data.size(), SafetensorsDTypeName(view.dtype),
                                                        ShapeString(view.shape)));
    }
    layout.data_order.push_back(&view);
  }
  std::stable_sort(layout.data_order.begin(), layout.data_order.end(),
                   [](const SafetensorsView* a, const SafetensorsView* b) {
                     return SafetensorsDTypeSize(a->dtype) > SafetensorsDTypeSize(b->dtype);
                   });
  Json header = Json::object();
  if (!metadata.empty()) {
    Json& items = header[kMetadataKey];
    for (const auto& [key, value] : metadata) {
      if (!IsValidUtf8(key) || !IsValidUtf8(value)) {
        return absl::InvalidArgumentError("safetensors metadata must be UTF-8");
      }
      items[key] = value;
    }
  }
  std::map<const SafetensorsView*, uint64_t> offsets;
  uint64_t offset = 0;
  for (const SafetensorsView* view : layout.data_order) {
    offsets[view] = offset;
    offset += view->data.size();
  }
  for (const SafetensorsView& view : tensors) {
    header[view.name] = {{"dtype", SafetensorsDTypeName(view.dtype)},
                         {"shape", view.shape},
                         {"data_offsets", {offsets[&view], offsets[&view] + view.data.size()}}};
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');
  uint64_t length = json.size();
  layout.header.resize(8);
  for (int i = 0; i < 8; ++i) layout.header[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  layout.header += json;
  return layout;
}

absl::StatusOr<std::string> SerializeSafetensors(const std::vector<SafetensorsView>& tensors,
                                                 const SafetensorsMetadata& metadata) {
  ASSIGN_OR_RETURN(SafetensorsLayout layout, LayOutSafetensors(tensors, metadata));
  std::string out = std::move(layout.header);
  for (const SafetensorsView* view : layout.data_order) out.append(view->data.data(), view->data.size());
  return out;
}

absl::StatusOr<ParsedSafetensors> ParseSafetensors(absl::string_view bytes, absl::string_view name) {
  if (bytes.size() < 8) {
    return Corrupt(name, absl::StrFormat("%d bytes are fewer than the 8-byte header length", bytes.size()));
  }
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = (header_bytes << 8) | static_cast<unsigned char>(bytes[i]);
  if (header_bytes > kMaxHeaderBytes || header_bytes > bytes.size() - 8) {
    return Corrupt(name, absl::StrFormat("header length %d exceeds the file of %d bytes or the %d-byte limit",
                                         header_bytes, bytes.size(), kMaxHeaderBytes));
  }
  const absl::string_view header = bytes.substr(8, header_bytes);
  if (header.empty() || header[0] != '{') return Corrupt(name, "header does not start with '{'");
  absl::StatusOr<Json> json = ParseJson(header);
  if (!json.ok()) return Corrupt(name, absl::StrCat("header is not valid JSON: ", json.status().message()));

  ParsedSafetensors parsed;
  std::vector<Entry> entries;
  for (const auto& [key, value] : json->items()) {
    if (key == kMetadataKey) {
      RETURN_IF_ERROR(ParseMetadata(name, value, &parsed.metadata));
      continue;
    }
    ASSIGN_OR_RETURN(Entry entry, ParseEntry(name, key, value));
    entries.push_back(std::move(entry));
  }
  // Check the data layout in offset order; hand the tensors out in header order.
  std::vector<Entry*> by_offset;
  for (Entry& entry : entries) by_offset.push_back(&entry);
  std::stable_sort(by_offset.begin(), by_offset.end(), [](const Entry* a, const Entry* b) {
    return std::tie(a->begin, a->end) < std::tie(b->begin, b->end);
  });
  const absl::string_view data = bytes.substr(8 + header_bytes);
  uint64_t expected = 0;
  for (Entry* entry : by_offset) {
    if (entry->begin != expected) {
      return Corrupt(name, absl::StrFormat("tensor %s starts at byte %d, expected %d: data must be contiguous "
                                           "from 0, without gaps or overlaps",
                                           Quoted(entry->view.name), entry->begin, expected));
    }
    expected = entry->end;
    if (expected > data.size()) {
      return Corrupt(name, absl::StrFormat("tensor %s ends at byte %d, beyond the %d bytes of data",
                                           Quoted(entry->view.name), expected, data.size()));
    }
    entry->view.data = data.substr(entry->begin, entry->end - entry->begin);
  }
  if (expected != data.size()) {
    return Corrupt(name,
                   absl::StrFormat("tensors end at byte %d, but the data section has %d bytes", expected, data.size()));
  }
  for (Entry& entry : entries) parsed.tensors.push_back(std::move(entry.view));
  return parsed;
}

}  // namespace ringmaster::engine
