// Where LibTorch's headers are: the C++ frontend's default compile flags (RuleCatalog::cxxDefaultFlags).
#pragma once
#include <string>
#include <vector>

namespace shardlint::rules::cxx {

// `-std=c++17` and `-I` for each LibTorch include folder found: Debian's libtorch-dev
// (/usr/include/torch/csrc/api/include), and the official archive unpacked at $LIBTORCH,
// $LIBTORCH_HOME, the prefix of $Torch_DIR (…/share/cmake/Torch), /opt/libtorch,
// /usr/local/libtorch or ~/libtorch (its include/ and include/torch/csrc/api/include).
std::vector<std::string> libtorchFlags();

}  // namespace shardlint::rules::cxx
