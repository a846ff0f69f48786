#include "fuzz/inflate.h"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"

namespace ringmaster::fuzz {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;
using Site = std::vector<const FieldDescriptor*>;  // from the root message to the field

void ListSites(const Descriptor* type, int depth, Site* prefix, std::vector<Site>* sites) {
  for (int i = 0; i < type->field_count(); ++i) {
    const FieldDescriptor* field = type->field(i);
    prefix->push_back(field);
    if (field->is_repeated() || field->cpp_type() == FieldDescriptor::CPPTYPE_STRING) sites->push_back(*prefix);
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE && !field->is_map() && depth < kMaxInflateDepth) {
      ListSites(field->message_type(), depth + 1, prefix, sites);
    }
    prefix->pop_back();
  }
}

// The inflatable fields of `type`, computed once per type.
const std::vector<Site>& SitesOf(const Descriptor* type) {
  static std::mutex mu;
  static auto* cache = new std::map<const Descriptor*, std::vector<Site>>();
  std::lock_guard<std::mutex> lock(mu);
  auto [it, inserted] = cache->try_emplace(type);
  if (inserted) {
    Site prefix;
    ListSites(type, 1, &prefix, &it->second);
  }
  return it->second;
}

// `value` repeated `copies` times (by doubling: an 8 MiB string of one byte
// is 23 appends, not 8 million).
std::string Repeat(const std::string& value, size_t copies) {
  std::string out;
  out.reserve(value.size() * copies);
  std::string block = value;
  while (copies != 0) {
    if ((copies & 1) != 0) out += block;
    copies >>= 1;
    if (copies != 0) block += block;
  }
  return out;
}

// A distinct key for entry `i` of a map, from the template entry's key.
void SetMapKey(Message* entry, size_t i) {
  const FieldDescriptor* key = entry->GetDescriptor()->map_key();
  const Reflection* r = entry->GetReflection();
  switch (key->cpp_type()) {
    case FieldDescriptor::CPPTYPE_STRING: {
      std::string base = r->GetString(*entry, key);
      if (base.empty()) base = "x";
      r->SetString(entry, key, absl::StrCat(base, i));
      break;
    }
    case FieldDescriptor::CPPTYPE_INT32:
      r->SetInt32(entry, key, static_cast<int32_t>(static_cast<uint32_t>(r->GetInt32(*entry, key)) + i));
      break;
    case FieldDescriptor::CPPTYPE_INT64:
      r->SetInt64(entry, key, static_cast<int64_t>(static_cast<uint64_t>(r->GetInt64(*entry, key)) + i));
      break;
    case FieldDescriptor::CPPTYPE_UINT32:
      r->SetUInt32(entry, key, static_cast<uint32_t>(r->GetUInt32(*entry, key) + i));
      break;
    case FieldDescriptor::CPPTYPE_UINT64:
      r->SetUInt64(entry, key, r->GetUInt64(*entry, key) + i);
      break;
    case FieldDescriptor::CPPTYPE_BOOL:
      r->SetBool(entry, key, (i & 1) != 0);
      break;
    default:
      break;
  }
}

// Adds `count` copies of the last entry of repeated message field `field`
// (a default entry when there is none), each map entry with its own key.
void AddMessages(Message* m, const FieldDescriptor* field, size_t count) {
  const Reflection* r = m->GetReflection();
  const int size = r->FieldSize(*m, field);
  std::unique_ptr<Message> entry(size > 0 ? r->GetRepeatedMessage(*m, field, size - 1).New()
                                          : r->GetMessageFactory()->GetPrototype(field->message_type())->New());
  if (size > 0) entry->CopyFrom(r->GetRepeatedMessage(*m, field, size - 1));
  for (size_t i = 0; i < count; ++i) {
    Message* added = r->AddMessage(m, field);
    added->CopyFrom(*entry);
    if (field->is_map()) SetMapKey(added, i);
  }
}

// Adds `count` entries to repeated field `field`; returns the bytes one adds
// (an estimate, for the budget) when count is 0.
size_t AddEntries(Message* m, const FieldDescriptor* field, size_t count) {
  const Reflection* r = m->GetReflection();
  const int size = r->FieldSize(*m, field);
  const int last = size - 1;
  switch (field->cpp_type()) {
#define RM_INFLATE_SCALAR(CPPTYPE, Type, fallback)                                        \
  case FieldDescriptor::CPPTYPE: {                                                      \
    const auto value = size > 0 ? r->GetRepeated##Type(*m, field, last) : (fallback); \
    for (size_t i = 0; i < count; ++i) r->Add##Type(m, field, value);                  \
    return 10;                                                                          \
  }
    RM_INFLATE_SCALAR(CPPTYPE_INT32, Int32, int32_t{1})
    RM_INFLATE_SCALAR(CPPTYPE_INT64, Int64, int64_t{1})
    RM_INFLATE_SCALAR(CPPTYPE_UINT32, UInt32, uint32_t{1})
    RM_INFLATE_SCALAR(CPPTYPE_UINT64, UInt64, uint64_t{1})
    RM_INFLATE_SCALAR(CPPTYPE_DOUBLE, Double, 1.0)
    RM_INFLATE_SCALAR(CPPTYPE_FLOAT, Float, 1.0f)
    RM_INFLATE_SCALAR(CPPTYPE_BOOL, Bool, true)
    RM_INFLATE_SCALAR(CPPTYPE_ENUM, EnumValue, field->enum_type()->value(0)->number())
#undef RM_INFLATE_SCALAR
    case FieldDescriptor::CPPTYPE_STRING: {
      std::string base = size > 0 ? r->GetRepeatedString(*m, field, last) : "";
      if (base.empty()) base = "x";
      for (size_t i = 0; i < count; ++i) r->AddString(m, field, absl::StrCat(base, i));
      return base.size() + 8;
    }
    case FieldDescriptor::CPPTYPE_MESSAGE: {
      if (count > 0) {
        AddMessages(m, field, count);
        return 0;
      }
      return 8 + (size > 0 ? r->GetRepeatedMessage(*m, field, last).ByteSizeLong() : 0);
    }
  }
  return 10;
}

std::string PathOf(const Site& site) {
  std::string path;
  for (size_t i = 0; i < site.size(); ++i) {
    absl::StrAppend(&path, site[i]->name());
    if (i + 1 < site.size()) absl::StrAppend(&path, site[i]->is_repeated() ? "[]." : ".");
  }
  return path;
}

}  // namespace

std::vector<std::string> InflatablePaths(const Descriptor* type) {
  std::vector<std::string> paths;
  for (const Site& site : SitesOf(type)) paths.push_back(PathOf(site));
  return paths;
}

std::string Inflate(Message* message, const Inflation& inflation, size_t* budget) {
  if (!inflation.enabled || budget == nullptr || *budget == 0) return "";
  const std::vector<Site>& sites = SitesOf(message->GetDescriptor());
  if (sites.empty()) return "";
  const Site& site = sites[inflation.target % sites.size()];
  // Down to the message that holds the field (the last entry of a repeated
  // message on the way, added if there is none).
  Message* m = message;
  for (size_t i = 0; i + 1 < site.size(); ++i) {
    const FieldDescriptor* field = site[i];
    const Reflection* r = m->GetReflection();
    if (field->is_repeated()) {
      const int size = r->FieldSize(*m, field);
      m = size > 0 ? r->MutableRepeatedMessage(m, field, size - 1) : r->AddMessage(m, field);
    } else {
      m = r->MutableMessage(m, field);
    }
  }
  const FieldDescriptor* field = site.back();
  const std::string path = PathOf(site);
  const Reflection* r = m->GetReflection();
  if (field->is_repeated()) {
    // Entries, by what each costs (a copy of the last, or a small default).
    const size_t each = std::max<size_t>(1, AddEntries(m, field, 0));
    const size_t count = std::min<size_t>({inflation.amount, kMaxInflatedEntries, *budget / each});
    if (count == 0) return "";
    AddEntries(m, field, count);
    *budget -= std::min(*budget, count * each);
    return path;
  }
  std::string value = r->GetString(*m, field);
  const size_t length = std::min<size_t>({inflation.amount, kMaxInflatedStringBytes, value.size() + *budget});
  if (length <= value.size()) return "";
  *budget -= length - value.size();
  if (value.empty()) value = "x";
  std::string grown = Repeat(value, length / value.size());
  grown.append(length - grown.size(), 'x');
  r->SetString(m, field, std::move(grown));
  return path;
}

}  // namespace ringmaster::fuzz
