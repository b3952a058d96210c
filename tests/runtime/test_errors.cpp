#include <cstdio>

#include "testing/testing.hpp"

namespace molaccel {
namespace {

TEST(Errors, InputErrorNamesFileAndLine) {
  InputError e("mols.smi", 12, "unbalanced brackets", __FILE__, __LINE__);
  EXPECT_STREQ(e.what(), "mols.smi:12: unbalanced brackets");
  EXPECT_EQ(e.path(), "mols.smi");
  EXPECT_EQ(e.line(), 12u);
  EXPECT_EQ(e.detail(), "unbalanced brackets");
  InputError no_line("db.fasta", 0, "empty file");
  EXPECT_STREQ(no_line.what(), "db.fasta: empty file");
}

TEST(Errors, HierarchyAndSourceLocation) {
  try {
    MOLACCEL_THROW(NotCompiled, "CUDA backend");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not compiled: CUDA backend"), std::string::npos);
    EXPECT_NE(std::string(e.source_file()).find("test_errors.cpp"), std::string::npos);
    EXPECT_GT(e.source_line(), 0);
  }
  CudaError oom(2, "out of memory", __FILE__, __LINE__);
  EXPECT_TRUE(oom.is_out_of_memory());
  EXPECT_FALSE(CudaError(700, "illegal address", __FILE__, __LINE__).is_out_of_memory());
}

TEST(AtomicWrite, WritesWholeFile) {
  testing::TempDir dir;
  const auto path = dir / "out.tsv";
  write_file_atomically(path, [](std::FILE* f) { std::fputs("a\tb\n", f); });
  EXPECT_EQ(testing::read_file(path), "a\tb\n");
  // Overwrites an existing file in one step.
  write_file_atomically(path, [](std::FILE* f) { std::fputs("c\n", f); });
  EXPECT_EQ(testing::read_file(path), "c\n");
}

TEST(AtomicWrite, FailureLeavesNoPartialOutput) {
  testing::TempDir dir;
  const auto path = dir / "out.tsv";
  EXPECT_THROW(write_file_atomically(path,
                                     [](std::FILE* f) {
                                       std::fputs("partial", f);
                                       throw InputError("in.smi", 3, "bad line");
                                     }),
               InputError);
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_TRUE(std::filesystem::is_empty(dir.path())) << "temporary file left behind";
}

TEST(AtomicWrite, UnwritableDirectoryIsAnError) {
  EXPECT_THROW(write_file_atomically("/nonexistent-dir/x.txt", [](std::FILE*) {}), InputError);
}

TEST(Hash, StableAndSensitive) {
  EXPECT_EQ(hash_hex("abc"), hash_hex("abc"));
  EXPECT_EQ(hash_hex("abc").size(), 32u);
  EXPECT_NE(hash_hex("abc"), hash_hex("abd"));
  EXPECT_NE(hash_hex(""), hash_hex(std::string(1, '\0')));
  EXPECT_NE(hash64("12345678x", 1), hash64("12345678y", 1));
  EXPECT_NE(hash64("same", 1), hash64("same", 2));
}

}  // namespace
}  // namespace molaccel
