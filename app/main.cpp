#include <exception>
#include <iostream>

#include "Registry.h"
#include "Cli.h"

int main(int argc, char** argv) {
  try {
    return shardlint::runCli(argc, argv, shardlint::rules::catalog());
  } catch (const std::exception& e) {
    std::cerr << "shardlint: internal error: " << e.what() << "\n";
  } catch (...) {
    std::cerr << "shardlint: internal error\n";
  }
  return shardlint::kExitInternal;
}
