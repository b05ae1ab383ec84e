/* Parse-only floor for the shardlint benchmark (scripts/bench/run.sh).
 *
 * Parses every .py file under the given directories once, on ONE thread, with the same
 * tree-sitter runtime and tree-sitter-python grammar sources that shardlint links
 * (third_party/src, extracted by scripts/setup.sh), and prints how many files and bytes it parsed.
 *
 * It walks directories with shardlint's discovery rules (analyzer/driver/Discovery.cpp:
 * skip hidden folders, node_modules, __pycache__, build, dist, site-packages, venv, env,
 * __pypackages__, _build, buck-out, htmlcov, *.egg-info and any folder with a pyvenv.cfg)
 * and skips the files shardlint skips before parsing (analyzer/driver/LintFiles.cpp: larger than
 * 2 MiB, NUL bytes, not UTF-8), so it parses the same files shardlint parses. It does nothing
 * else: no semantic pass, no rules, no output per file. One parser is reused for every file,
 * as shardlint reuses one per thread.
 *
 * Usage: parse_floor DIR...   prints "files=N bytes=B skipped=S syntax_errors=E"
 */
#define _DEFAULT_SOURCE
#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <tree_sitter/api.h>

const TSLanguage *tree_sitter_python(void);

enum { MAX_FILE_BYTES = 2 * 1024 * 1024 };

static TSParser *parser;
static unsigned long long n_files, n_bytes, n_skipped, n_syntax_errors;
static char *buf;
static size_t buf_cap;

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

static bool skip_directory(const char *dir, const char *name) {
  static const char *const skipped[] = {"node_modules", "__pycache__", "build",   "dist",     "site-packages",
                                        "venv",         "env",         "__pypackages__", "_build", "buck-out",
                                        "htmlcov",      NULL};
  if (strlen(name) > 1 && name[0] == '.') return true;
  for (const char *const *s = skipped; *s; ++s)
    if (strcmp(name, *s) == 0) return true;
  if (strlen(name) > 9 && ends_with(name, ".egg-info")) return true;
  char cfg[4096];
  snprintf(cfg, sizeof cfg, "%s/pyvenv.cfg", dir);
  struct stat st;
  return stat(cfg, &st) == 0;
}

static bool valid_utf8(const unsigned char *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    unsigned char c = s[i];
    if (c < 0x80) { ++i; continue; }
    size_t len;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; }
    else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; }
    else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; }
    else return false;
    if (i + len > n) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    i += len;
  }
  return true;
}

static void parse_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) { ++n_skipped; return; }
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || st.st_size > MAX_FILE_BYTES) { ++n_skipped; fclose(f); return; }
  size_t size = (size_t)st.st_size;
  if (size + 1 > buf_cap) {
    buf_cap = size + 1;
    buf = realloc(buf, buf_cap);
    if (!buf) { perror("realloc"); exit(2); }
  }
  size_t got = fread(buf, 1, size, f);
  fclose(f);
  if (got != size || memchr(buf, '\0', got) || !valid_utf8((const unsigned char *)buf, got)) { ++n_skipped; return; }
  TSTree *tree = ts_parser_parse_string(parser, NULL, buf, (uint32_t)got);
  if (!tree) { ++n_skipped; return; }
  if (ts_node_has_error(ts_tree_root_node(tree))) ++n_syntax_errors;
  ts_tree_delete(tree);
  ++n_files;
  n_bytes += got;
}

static void walk(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  char path[4096];
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    struct stat st;
    if (stat(path, &st) != 0) continue; /* follows symlinks, like std::filesystem::status */
    if (S_ISDIR(st.st_mode)) {
      /* recursive_directory_iterator does not follow directory symlinks by default */
      struct stat lst;
      if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode)) continue;
      if (!skip_directory(path, e->d_name)) walk(path);
    } else if (S_ISREG(st.st_mode) && ends_with(e->d_name, ".py")) {
      parse_file(path);
    }
  }
  closedir(d);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s DIR...\n", argv[0]);
    return 2;
  }
  parser = ts_parser_new();
  if (!ts_parser_set_language(parser, tree_sitter_python())) {
    fprintf(stderr, "parse_floor: grammar/runtime ABI mismatch\n");
    return 2;
  }
  for (int i = 1; i < argc; ++i) {
    struct stat st;
    if (stat(argv[i], &st) != 0) { fprintf(stderr, "parse_floor: no such path: %s\n", argv[i]); return 2; }
    if (S_ISDIR(st.st_mode)) walk(argv[i]);
    else parse_file(argv[i]);
  }
  ts_parser_delete(parser);
  free(buf);
  printf("files=%llu bytes=%llu skipped=%llu syntax_errors=%llu\n", n_files, n_bytes, n_skipped, n_syntax_errors);
  return 0;
}
