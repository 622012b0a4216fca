#include "service/common/utf8.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tensord {
namespace {

// The rules byte by byte (RFC 3629): the fast path for ASCII must agree.
bool ReferenceIsValidUtf8(const std::string& text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<uint8_t>(text[i]);
    size_t length = 0;
    uint32_t code = 0;
    if (lead < 0x80) {
      ++i;
      continue;
    }
    if ((lead & 0xE0) == 0xC0) {
      length = 2;
      code = lead & 0x1F;
    } else if ((lead & 0xF0) == 0xE0) {
      length = 3;
      code = lead & 0x0F;
    } else if ((lead & 0xF8) == 0xF0) {
      length = 4;
      code = lead & 0x07;
    } else {
      return false;
    }
    if (text.size() - i < length) return false;
    for (size_t k = 1; k < length; ++k) {
      const auto next = static_cast<uint8_t>(text[i + k]);
      if ((next & 0xC0) != 0x80) return false;
      code = (code << 6) | (next & 0x3F);
    }
    const uint32_t smallest[] = {0, 0, 0x80, 0x800, 0x10000};
    if (code < smallest[length] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) {
      return false;
    }
    i += length;
  }
  return true;
}

bool FastIsValidUtf8(const std::string& text) {
  return IsValidUtf8(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

// Every valid and invalid sequence the rules name, at every offset around
// the eight-byte ASCII steps and with ASCII on both sides, is judged as the
// byte-by-byte rules judge it.
TEST(Utf8Test, AgreesWithTheRulesAtEveryOffset) {
  const std::vector<std::string> sequences = {
      "\xC3\xA9",          // é
      "\xE2\x82\xAC",      // €
      "\xF0\x9F\x98\x80",  // an emoji
      "\xC0\xAF",          // overlong '/'
      "\xE0\x80\xAF",      // overlong, three bytes
      "\xED\xA0\x80",      // a surrogate
      "\xF4\x90\x80\x80",  // past U+10FFFF
      "\x80",              // a continuation alone
      "\xC3",              // cut short
      "\xE2\x82",          // cut short
      "\xFF",              // never in UTF-8
      "\xC3\x28",          // a bad continuation
  };
  for (const std::string& sequence : sequences) {
    for (size_t before = 0; before <= 17; ++before) {
      for (size_t after : {0, 1, 7, 8, 9}) {
        const std::string text = std::string(before, 'a') + sequence + std::string(after, 'b');
        EXPECT_EQ(FastIsValidUtf8(text), ReferenceIsValidUtf8(text))
            << "sequence of " << sequence.size() << " bytes after " << before << ", then " << after;
      }
    }
  }
  EXPECT_TRUE(FastIsValidUtf8(""));
  EXPECT_TRUE(FastIsValidUtf8(std::string(64, 'x')));
  EXPECT_FALSE(FastIsValidUtf8(std::string(63, 'x') + "\x80"));
}

// Random strings, mostly ASCII with some high bytes, judged alike.
TEST(Utf8Test, AgreesWithTheRulesOnRandomText) {
  std::mt19937 random(29);
  std::uniform_int_distribution<int> length(0, 40);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_int_distribution<int> ascii(0x20, 0x7E);
  int valid = 0;
  for (int round = 0; round < 20000; ++round) {
    std::string text(length(random), '\0');
    for (char& c : text) {
      c = static_cast<char>(random() % 8 == 0 ? byte(random) : ascii(random));
    }
    const bool expected = ReferenceIsValidUtf8(text);
    valid += expected ? 1 : 0;
    ASSERT_EQ(FastIsValidUtf8(text), expected) << round;
  }
  EXPECT_GT(valid, 1000) << "the rounds must try valid text too";
}

}  // namespace
}  // namespace tensord
