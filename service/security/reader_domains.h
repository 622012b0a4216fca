// Which names may share an arena: the access domain of a name is the set of
// token prefixes that can read it. A reader handed one slot of an arena can
// map the whole arena, so an arena holds names of one domain only; then
// every reader of one of its names may read them all.
#ifndef TENSORD_SERVICE_SECURITY_READER_DOMAINS_H_
#define TENSORD_SERVICE_SECURITY_READER_DOMAINS_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "service/security/token_file.h"

namespace tensord {

// The domain of a name under `grants`: the prefixes of the prefix-bound
// grants that may read (read or admin) and that the name starts with,
// joined. Names with equal domains have exactly the same prefix-bound
// readers; every other reader (allow-listed peers, unbound tokens) reads
// all names. Null when no grant is prefix-bound: one domain for all.
std::function<std::string(absl::string_view name)> ReaderDomainsOf(
    const std::vector<TokenGrant>& grants);

}  // namespace tensord

#endif  // TENSORD_SERVICE_SECURITY_READER_DOMAINS_H_
