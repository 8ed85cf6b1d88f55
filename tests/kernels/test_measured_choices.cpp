// The measured-choice store (kernels/measured_choices.h) and its files in the cache directory
// (compile/codegen/measured_choice_files.h): a choice recorded by one process is found by the
// next; damaged, foreign, oversized or malformed files are not used and never crash; a directory
// that cannot be written keeps choices in memory; records merge with other processes' entries.
// The GPU's use of it (a stored linear path taken without timing) is in test_skinny_gemm.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "compile/codegen/cache_entry.h"
#include "compile/codegen/measured_choice_files.h"
#include "kernels/measured_choices.h"
#include "support/test_tensors.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

const std::string kDevice = "test device 9.0, module test";

// Reads `cache_dir` afresh, as a new process would (a store reads its files once).
void reopen(const std::string& cache_dir) {
  use_measured_choice_files(testing::fresh_temp_dir("measured_choices_elsewhere"));
  use_measured_choice_files(cache_dir);
}

class MeasuredChoices : public ::testing::Test {
 protected:
  void TearDown() override { set_measured_choice_store(nullptr); }
};

TEST_F(MeasuredChoices, NoStoreFindsNothingAndRecordsNothing) {
  set_measured_choice_store(nullptr);
  record_measured_choice(kDevice, "linear a", "simt_r2 algorithm 1");
  EXPECT_FALSE(find_measured_choice(kDevice, "linear a").has_value());
}

TEST_F(MeasuredChoices, ARecordedChoiceIsFoundByTheNextProcess) {
  const std::string dir = testing::fresh_temp_dir("measured_choices_roundtrip");
  use_measured_choice_files(dir);
  record_measured_choice(kDevice, "linear a", "simt_r2 algorithm 1");
  record_measured_choice(kDevice, "linear b", "cublaslt algorithm 3");
  record_measured_choice(kDevice, "linear a", "mma_t1 algorithm 2");  // replaces
  EXPECT_EQ(find_measured_choice(kDevice, "linear a"), "mma_t1 algorithm 2");
  reopen(dir);
  EXPECT_EQ(find_measured_choice(kDevice, "linear a"), "mma_t1 algorithm 2");
  EXPECT_EQ(find_measured_choice(kDevice, "linear b"), "cublaslt algorithm 3");
  EXPECT_FALSE(find_measured_choice(kDevice, "linear c").has_value());
  // Another device (a rebuilt module, another GPU) has its own file and finds none of them.
  EXPECT_FALSE(find_measured_choice("other device", "linear a").has_value());
  EXPECT_TRUE(fs::exists(measured_choice_file(dir, kDevice)));
  EXPECT_FALSE(fs::exists(measured_choice_file(dir, "other device")));
}

TEST_F(MeasuredChoices, RecordsMergeWithWhatOtherProcessesWrote) {
  const std::string dir = testing::fresh_temp_dir("measured_choices_merge");
  use_measured_choice_files(dir);
  record_measured_choice(kDevice, "linear a", "simt_r2 algorithm 1");
  // Another process writes its own entries meanwhile (its file has ours, read before).
  write_cache_entry(
      measured_choice_file(dir, kDevice),
      "device " + kDevice + "\nlinear a\tsimt_r2 algorithm 1\nlinear x\tcublaslt algorithm 1\n");
  record_measured_choice(kDevice, "linear b", "simt_r4 algorithm 1");
  reopen(dir);
  EXPECT_EQ(find_measured_choice(kDevice, "linear a"), "simt_r2 algorithm 1");
  EXPECT_EQ(find_measured_choice(kDevice, "linear b"), "simt_r4 algorithm 1");
  EXPECT_EQ(find_measured_choice(kDevice, "linear x"), "cublaslt algorithm 1");
}

TEST_F(MeasuredChoices, DamagedFilesAreNotUsed) {
  const std::string dir = testing::fresh_temp_dir("measured_choices_damaged");
  use_measured_choice_files(dir);
  record_measured_choice(kDevice, "linear a", "simt_r2 algorithm 1");
  const std::string path = measured_choice_file(dir, kDevice);
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  ASSERT_GT(bytes.size(), 30u);
  // A flipped byte, a file cut short, an empty file: the entry's check fails.
  for (const std::string& damaged :
       {std::string(bytes).replace(10, 1, "#"), bytes.substr(0, bytes.size() - 5), std::string()}) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << damaged;
    reopen(dir);
    EXPECT_FALSE(find_measured_choice(kDevice, "linear a").has_value());
  }
  // A whole entry of another device under this device's name (a hash collision, a copied file).
  write_cache_entry(path, "device other\nlinear a\tsimt_r2 algorithm 1\n");
  reopen(dir);
  EXPECT_FALSE(find_measured_choice(kDevice, "linear a").has_value());
  // More than a store file may hold.
  write_cache_entry(path, "device " + kDevice + "\nlinear a\tsimt_r2 algorithm 1\n" +
                              std::string(size_t{9} << 20, 'x'));
  reopen(dir);
  EXPECT_FALSE(find_measured_choice(kDevice, "linear a").has_value());
  // Recording again replaces the bad file with a good one.
  record_measured_choice(kDevice, "linear a", "simt_r4 algorithm 2");
  reopen(dir);
  EXPECT_EQ(find_measured_choice(kDevice, "linear a"), "simt_r4 algorithm 2");
}

TEST_F(MeasuredChoices, MalformedLinesAreSkippedAndTheRestKept) {
  const std::string dir = testing::fresh_temp_dir("measured_choices_lines");
  const std::string path = measured_choice_file(dir, kDevice);
  fs::create_directories(fs::path(path).parent_path());
  write_cache_entry(
      path, "device " + kDevice + "\nno tab here\n\tno problem\nno choice\t\ntoo\tmany\ttabs\n" +
                std::string(4000, 'p') + "\tlong problem\nlinear good\tsimt_r8 algorithm 1");
  use_measured_choice_files(dir);
  reopen(dir);
  EXPECT_EQ(find_measured_choice(kDevice, "linear good"), "simt_r8 algorithm 1");
  EXPECT_FALSE(find_measured_choice(kDevice, "no tab here").has_value());
  EXPECT_FALSE(find_measured_choice(kDevice, "too").has_value());
  EXPECT_FALSE(find_measured_choice(kDevice, "").has_value());
}

TEST_F(MeasuredChoices, TextThatIsNotOneLineIsNotStored) {
  const std::string dir = testing::fresh_temp_dir("measured_choices_text");
  use_measured_choice_files(dir);
  record_measured_choice(kDevice, "linear\ta", "simt_r2 algorithm 1");
  record_measured_choice(kDevice, "linear b", "simt_r2\nalgorithm 1");
  record_measured_choice(kDevice, "linear c", "");
  EXPECT_FALSE(find_measured_choice(kDevice, "linear\ta").has_value());
  EXPECT_FALSE(find_measured_choice(kDevice, "linear b").has_value());
  EXPECT_FALSE(find_measured_choice(kDevice, "linear c").has_value());
}

TEST_F(MeasuredChoices, AnUnwritableDirectoryKeepsChoicesInMemory) {
  const std::string dir = testing::fresh_temp_dir("measured_choices_unwritable");
  // A file where the store's folder would be: nothing can be created under it.
  fs::create_directories(dir);
  std::ofstream(dir + "/measured") << "in the way";
  ASSERT_TRUE(fs::is_regular_file(dir + "/measured"));
  use_measured_choice_files(dir);
  EXPECT_NO_THROW(record_measured_choice(kDevice, "linear a", "simt_r2 algorithm 1"));
  EXPECT_NO_THROW(record_measured_choice(kDevice, "linear b", "simt_r4 algorithm 1"));
  EXPECT_EQ(find_measured_choice(kDevice, "linear a"), "simt_r2 algorithm 1");
  EXPECT_EQ(find_measured_choice(kDevice, "linear b"), "simt_r4 algorithm 1");
}

}  // namespace
}  // namespace tessera
