// Well-formed UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing
// past U+10FFFF. What protobuf requires of a proto3 string field.
#ifndef TENSORD_SERVICE_COMMON_UTF8_H_
#define TENSORD_SERVICE_COMMON_UTF8_H_

#include <cstdint>
#include <span>

namespace tensord {

bool IsValidUtf8(std::span<const uint8_t> text);

}  // namespace tensord

#endif  // TENSORD_SERVICE_COMMON_UTF8_H_
