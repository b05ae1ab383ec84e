// `shardlint_fault`: the shardlint command line over tests/FaultCatalog.h's catalog (tests only), so
// that the CLI tests can make one file's analysis fail (a marker in its text) or, with
// SHARDLINT_FAULT_INTERNAL set, the run itself fail after the analysis.
#include <cstdlib>
#include <exception>
#include <iostream>

#include "Cli.h"
#include "FaultCatalog.h"

int main(int argc, char** argv) {
  try {
    static const shardlint::RuleCatalog catalog =
        shardlint::testing::faultCatalog(std::getenv("SHARDLINT_FAULT_INTERNAL") != nullptr);
    return shardlint::runCli(argc, argv, catalog);
  } catch (const std::exception& e) {
    std::cerr << "shardlint: internal error: " << e.what() << "\n";
  }
  return shardlint::kExitInternal;
}
