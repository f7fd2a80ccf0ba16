// The key pair a client uses to check what an endpoint is when its own key got
// no answer (weft::client::ProbePeer): weftd's provisioner endpoint lets an
// unknown key in, its api endpoint does not. It is public on purpose, so that
// weftd can tell such a check from a stranger's key and not log it as one; it
// is nobody's key, and a key nobody holds the secret of gains nothing from it.
#pragma once

#include <string_view>

namespace weft::curve {

inline constexpr std::string_view kProbePublicKey = "ICST6bJ^!R2TxXaQf<R59D#h8N/*+@TC^ihy4q<d";
inline constexpr std::string_view kProbeSecretKey = "NAfYyO4f2Z&qMNIE{OqDsn/a37[7jCHO{7qiB2Lf";

}  // namespace weft::curve
