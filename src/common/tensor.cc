#include "common/tensor.h"

#include <cstring>
#include <limits>

#include "common/strings.h"

namespace mmserve {
namespace {

struct TypeInfo {
  DataType type;
  std::string_view name;
  size_t size;
};

constexpr TypeInfo kTypes[] = {
    {DataType::kBool, "BOOL", 1},     {DataType::kUint8, "UINT8", 1},
    {DataType::kUint16, "UINT16", 2}, {DataType::kUint32, "UINT32", 4},
    {DataType::kUint64, "UINT64", 8}, {DataType::kInt8, "INT8", 1},
    {DataType::kInt16, "INT16", 2},   {DataType::kInt32, "INT32", 4},
    {DataType::kInt64, "INT64", 8},   {DataType::kFp16, "FP16", 2},
    {DataType::kBf16, "BF16", 2},     {DataType::kFp32, "FP32", 4},
    {DataType::kFp64, "FP64", 8},     {DataType::kBytes, "BYTES", 0},
};

uint32_t ReadLength(const char* p) {
  uint32_t n;
  std::memcpy(&n, p, 4);  // little-endian hosts only (x86-64, aarch64)
  return n;
}

}  // namespace

std::string_view DataTypeName(DataType type) { return kTypes[static_cast<int>(type)].name; }
size_t DataTypeSize(DataType type) { return kTypes[static_cast<int>(type)].size; }

std::optional<DataType> ParseDataType(std::string_view name) {
  for (const auto& t : kTypes) {
    if (t.name == name) return t.type;
  }
  return std::nullopt;
}

std::string ShapeToString(const Shape& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

std::optional<int64_t> ElementCount(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) return std::nullopt;
    n *= d;
  }
  return n;
}

bool ShapeMatches(const Shape& pattern, const Shape& shape) {
  if (pattern.size() != shape.size()) return false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != -1 && pattern[i] != shape[i]) return false;
  }
  return true;
}

Status Tensor::Validate() const {
  for (int64_t d : shape_) {
    if (d < 0) {
      return InvalidArgument("input '" + name_ + "': shape " + ShapeToString(shape_) +
                             " must have non-negative dimensions");
    }
  }
  auto count = ElementCount(shape_);
  if (!count) {
    return InvalidArgument("input '" + name_ + "': shape " + ShapeToString(shape_) +
                           " has more elements than any tensor can hold");
  }
  if (type_ != DataType::kBytes) {
    // Checked: a shape whose byte size wraps around must not match a short (or empty) body.
    const auto expected = CheckedMul(*count, static_cast<int64_t>(DataTypeSize(type_)));
    if (!expected || static_cast<uint64_t>(*expected) != data_.size()) {
      return InvalidArgument("input '" + name_ + "': shape " + ShapeToString(shape_) + " of " +
                             std::string(DataTypeName(type_)) + " needs " +
                             (expected ? std::to_string(*expected) : "more than 2^63") +
                             " bytes, found " + std::to_string(data_.size()));
    }
    return Status::Ok();
  }
  size_t pos = 0;
  int64_t elements = 0;
  while (pos < data_.size()) {
    if (data_.size() - pos < 4) break;
    const uint32_t len = ReadLength(data_.data() + pos);
    if (data_.size() - pos - 4 < len) break;
    pos += 4 + len;
    ++elements;
  }
  if (pos != data_.size()) {
    return InvalidArgument("input '" + name_ + "': BYTES data is truncated after element " +
                           std::to_string(elements));
  }
  if (elements != *count) {
    return InvalidArgument("input '" + name_ + "': shape " + ShapeToString(shape_) + " needs " +
                           std::to_string(*count) + " BYTES elements, found " +
                           std::to_string(elements));
  }
  return Status::Ok();
}

std::vector<std::string_view> Tensor::BytesElements() const {
  std::vector<std::string_view> out;
  size_t pos = 0;
  while (pos + 4 <= data_.size()) {
    const uint32_t len = ReadLength(data_.data() + pos);
    out.emplace_back(data_.data() + pos + 4, len);
    pos += 4 + len;
  }
  return out;
}

void Tensor::AppendBytesElement(std::string& buffer, std::string_view element) {
  const auto len = static_cast<uint32_t>(element.size());
  buffer.append(reinterpret_cast<const char*>(&len), 4);
  buffer.append(element);
}

}  // namespace mmserve
