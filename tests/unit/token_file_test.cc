#include "service/security/token_file.h"

#include <ostream>
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "service/security/token_authenticator.h"

namespace tensord {
namespace {

constexpr char kReaderToken[] = "reader-token-0123456789";
// SHA-256 of "abc" (FIPS 180-2 test vector).
constexpr char kAbcDigestHex[] = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

TEST(TokenFileTest, ParsesPlaintextHashedCommentsAndPrefixes) {
  const std::string file = absl::StrCat(
      "# tensord tokens\n"
      "\n",
      kReaderToken, " read\n", "  sha256:", kAbcDigestHex, "\twrite,read   team-a/  \n",
      "admin-token-abcdefghijkl admin\n");
  absl::StatusOr<std::vector<TokenGrant>> grants = ParseTokenFile(file);
  ASSERT_TRUE(grants.ok()) << grants.status();
  ASSERT_EQ(grants->size(), 3u);

  EXPECT_EQ((*grants)[0].digest, DigestToken(kReaderToken));
  EXPECT_EQ((*grants)[0].permissions, kPermissionRead);
  EXPECT_EQ((*grants)[0].name_prefix, "");
  EXPECT_EQ((*grants)[0].line, 3);

  EXPECT_EQ((*grants)[1].digest, DigestToken("abc"));
  EXPECT_EQ((*grants)[1].permissions, kPermissionRead | kPermissionWrite);
  EXPECT_EQ((*grants)[1].name_prefix, "team-a/");

  EXPECT_EQ((*grants)[2].permissions, kPermissionRead | kPermissionWrite | kPermissionAdmin);
}

TEST(TokenFileTest, UppercaseHexDigestMatchesLowercase) {
  std::string upper = kAbcDigestHex;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  absl::StatusOr<std::vector<TokenGrant>> grants =
      ParseTokenFile(absl::StrCat("sha256:", upper, " read\n"));
  ASSERT_TRUE(grants.ok()) << grants.status();
  EXPECT_EQ((*grants)[0].digest, DigestToken("abc"));
}

struct BadFile {
  std::string contents;
  std::string message;  // a substring the error must contain
};
// Names the CTest entries by the expected error, not by raw bytes.
void PrintTo(const BadFile& bad, std::ostream* out) { *out << bad.message; }

class TokenFileErrorTest : public ::testing::TestWithParam<BadFile> {};

TEST_P(TokenFileErrorTest, RefusesWithTheLineAndReason) {
  absl::StatusOr<std::vector<TokenGrant>> grants = ParseTokenFile(GetParam().contents);
  ASSERT_FALSE(grants.ok());
  EXPECT_EQ(grants.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(grants.status().message().find(GetParam().message), std::string::npos)
      << grants.status();
}

INSTANTIATE_TEST_SUITE_P(
    Malformed, TokenFileErrorTest,
    ::testing::Values(BadFile{"", "no tokens"}, BadFile{"# only a comment\n\n", "no tokens"},
                      BadFile{"lonely-token-0123456789\n", "line 1 has 1 fields"},
                      BadFile{"a-token-0123456789abc read team/ extra\n", "line 1 has 4 fields"},
                      BadFile{"short read\n", "token has 5 characters, want 16..4096"},
                      BadFile{"a-token-0123456789abc read,delete\n", "permission 'delete' is not"},
                      BadFile{"a-token-0123456789abc read,\n", "permission '' is not"},
                      BadFile{"a-token-0123456789abc read team$a/\n", "line 1: name prefix"},
                      BadFile{"a-token-0123456789abc read team-a\n",
                              "line 1: name prefix 'team-a' must end with '/'"},
                      BadFile{"sha256:abcd read\n", "has 4 hex digits, want 64"},
                      BadFile{absl::StrCat("sha256:", std::string(63, 'a'), "g read\n"),
                              "non-hex digit"},
                      BadFile{absl::StrCat("\n", kReaderToken, " read\n", kReaderToken, " write\n"),
                              "line 3 repeats the token"},
                      // The same token once in plaintext and once hashed is a repeat too.
                      BadFile{absl::StrCat("abc-but-long-enough-0 read\nsha256:", kAbcDigestHex,
                                           " read\nabc read\n"),
                              "line 3: token has 3"}));

TEST(TokenFileTest, ErrorsNeverQuoteTheToken) {
  const std::string secret = "s3cret-token-value-xyz";
  absl::StatusOr<std::vector<TokenGrant>> grants = ParseTokenFile(secret + " readwrite\n");
  ASSERT_FALSE(grants.ok());
  EXPECT_EQ(grants.status().message().find(secret), std::string::npos) << grants.status();
}

TEST(TokenFileTest, LoadNamesAMissingFile) {
  absl::StatusOr<std::vector<TokenGrant>> grants = LoadTokenFile("/nonexistent/tokens.txt");
  ASSERT_FALSE(grants.ok());
  EXPECT_NE(grants.status().message().find("/nonexistent/tokens.txt"), std::string::npos);
}

class TokenAuthenticatorTest : public ::testing::Test {
 protected:
  TokenAuthenticatorTest()
      : authenticator_(ParseTokenFile("reader-token-0123456789 read\n"
                                      "writer-token-0123456789 write\n"
                                      "team-a-token-0123456789 read,write team-a/\n"
                                      "admin-token-01234567890 admin\n")
                           .value()) {}
  TokenAuthenticator authenticator_;
};

TEST_F(TokenAuthenticatorTest, MissingMalformedOrUnknownTokensAreUnauthenticated) {
  for (std::optional<absl::string_view> header :
       {std::optional<absl::string_view>(),
        std::optional<absl::string_view>("reader-token-0123456789"),
        std::optional<absl::string_view>("Basic cmVhZGVy"),
        std::optional<absl::string_view>("Bearer reader-token-012345678"),
        std::optional<absl::string_view>("Bearer ")}) {
    absl::StatusOr<const TokenGrant*> grant = authenticator_.Admit(header, "Stat");
    EXPECT_EQ(grant.status().code(), absl::StatusCode::kUnauthenticated)
        << (header ? *header : "(none)") << ": " << grant.status();
  }
}

TEST_F(TokenAuthenticatorTest, PermissionsFollowTheRpcTable) {
  EXPECT_TRUE(authenticator_.Admit("Bearer reader-token-0123456789", "Fetch").ok());
  EXPECT_TRUE(authenticator_.Admit("bearer reader-token-0123456789", "List").ok());
  absl::StatusOr<const TokenGrant*> put =
      authenticator_.Admit("Bearer reader-token-0123456789", "Put");
  EXPECT_EQ(put.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(put.status().message().find("Put needs permission write"), std::string::npos)
      << put.status();
  absl::StatusOr<const TokenGrant*> fetch =
      authenticator_.Admit("Bearer writer-token-0123456789", "Fetch", "models/w");
  EXPECT_EQ(fetch.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(fetch.status().message().find("Fetch of 'models/w' needs permission read"),
            std::string::npos)
      << fetch.status();
  EXPECT_TRUE(authenticator_.Admit("Bearer writer-token-0123456789", "Delete").ok());
  // Any known token may ask for server info; admin RPCs need admin.
  EXPECT_TRUE(authenticator_.Admit("Bearer writer-token-0123456789", "GetServerInfo").ok());
  EXPECT_EQ(authenticator_.Admit("Bearer writer-token-0123456789", "Snapshot").status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(authenticator_.Admit("Bearer admin-token-01234567890", "Snapshot").ok());
  EXPECT_TRUE(authenticator_.Admit("Bearer admin-token-01234567890", "IssueHandoffToken").ok());
  // A handoff token carries its caller's own permissions and prefix
  // (HandoffScope), so a namespaced token may ask for one too.
  EXPECT_TRUE(authenticator_.Admit("Bearer team-a-token-0123456789", "IssueHandoffToken").ok());
}

TEST_F(TokenAuthenticatorTest, NamespacedTokenTouchesOnlyItsNames) {
  const TokenGrant* grant = authenticator_.Admit("Bearer team-a-token-0123456789", "Put").value();
  EXPECT_TRUE(TokenAuthenticator::CheckName(*grant, "Put", "team-a/w").ok());
  absl::Status other = TokenAuthenticator::CheckName(*grant, "Put", "team-b/w");
  EXPECT_EQ(other.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(other.message().find("Put of 'team-b/w'"), std::string::npos) << other;

  EXPECT_EQ(TokenAuthenticator::ListPrefix(*grant, "").value(), "team-a/");
  EXPECT_EQ(TokenAuthenticator::ListPrefix(*grant, "team").value(), "team-a/");
  EXPECT_EQ(TokenAuthenticator::ListPrefix(*grant, "team-a/x").value(), "team-a/x");
  EXPECT_EQ(TokenAuthenticator::ListPrefix(*grant, "team-b/").status().code(),
            absl::StatusCode::kPermissionDenied);
}

}  // namespace
}  // namespace tensord
