// Tensor: a named, typed, shaped block of bytes — the unit every layer exchanges.
//
// The data is one contiguous, row-major, little-endian buffer with no padding, exactly as the
// KServe v2 binary tensor extension lays it out. BYTES tensors use that extension's layout too:
// each element is a 4-byte little-endian length followed by its bytes. So a binary request body
// becomes a Tensor by a copy, and a Tensor becomes a binary response by a copy.
//
// Thread-compatible: a Tensor has one owner at a time.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace mmserve {

enum class DataType : uint8_t {
  kBool, kUint8, kUint16, kUint32, kUint64, kInt8, kInt16, kInt32, kInt64,
  kFp16, kBf16, kFp32, kFp64, kBytes,
};

inline constexpr DataType kAllDataTypes[] = {
    DataType::kBool,  DataType::kUint8, DataType::kUint16, DataType::kUint32, DataType::kUint64,
    DataType::kInt8,  DataType::kInt16, DataType::kInt32,  DataType::kInt64,  DataType::kFp16,
    DataType::kBf16,  DataType::kFp32,  DataType::kFp64,   DataType::kBytes};

std::string_view DataTypeName(DataType type);            // "FP32", as on the KServe wire
std::optional<DataType> ParseDataType(std::string_view name);
size_t DataTypeSize(DataType type);                      // bytes per element; 0 for BYTES

using Shape = std::vector<int64_t>;  // -1 marks a variable dimension in a signature
std::string ShapeToString(const Shape& shape);           // "[2,-1]"
// The number of elements of a concrete shape, or nullopt if a dimension is negative or it
// overflows.
std::optional<int64_t> ElementCount(const Shape& shape);
// True when `shape` fits `pattern`: same rank, and every pattern dimension is -1 or equal.
bool ShapeMatches(const Shape& pattern, const Shape& shape);

class Tensor {
 public:
  Tensor() = default;
  Tensor(std::string name, DataType type, Shape shape, std::string data = {})
      : name_(std::move(name)), type_(type), shape_(std::move(shape)), data_(std::move(data)) {}

  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }
  DataType type() const { return type_; }
  const Shape& shape() const { return shape_; }
  const std::string& data() const { return data_; }
  std::string& mutable_data() { return data_; }
  size_t size_bytes() const { return data_.size(); }

  // Checks that the buffer holds exactly the elements the shape promises (for BYTES: that it
  // parses into that many length-prefixed elements). The message names the tensor.
  Status Validate() const;

  // BYTES only: the elements as views into data(). REQUIRES: Validate().ok().
  std::vector<std::string_view> BytesElements() const;
  // Appends one BYTES element in the length-prefixed layout.
  static void AppendBytesElement(std::string& buffer, std::string_view element);

 private:
  std::string name_;
  DataType type_ = DataType::kFp32;
  Shape shape_;
  std::string data_;
};

}  // namespace mmserve
