// Bad arguments to ops (eager mode) throw tessera::Error whose message names the op, the
// argument and the shapes or dtypes involved, so a user can find and fix the call.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <numeric>

#include "compile/ops/ops.h"
#include "compile/trace/dispatch.h"
#include "runtime/check.h"
#include "support/error_of.h"

namespace tessera {
namespace {

using ::testing::AllOf;
using testing::error_of;
using ::testing::HasSubstr;

// A tensor of nonzero values 1, 2, 3, ... (scaled) of the given shape and dtype.
Tensor filled(Shape shape, DType dtype = DType::f32) {
  std::vector<float> values(static_cast<size_t>(shape_numel(shape)));
  std::iota(values.begin(), values.end(), 1.0f);
  return Tensor::from_floats(values, std::move(shape), dtype);
}

Tensor ids(std::vector<int64_t> values, DType dtype = DType::i64) {
  Shape shape = {static_cast<int64_t>(values.size())};
  return Tensor::from_ints(values, shape, dtype);
}

TEST(OpErrors, AddRejectsShapesThatDoNotBroadcast) {
  std::string message = error_of([] { ops::add(filled({3, 4}), filled({5})); });
  EXPECT_THAT(message, AllOf(HasSubstr("add"), HasSubstr("'a'"), HasSubstr("'b'"),
                             HasSubstr("[3, 4]"), HasSubstr("[5]")));
}

TEST(OpErrors, BinaryOpRejectsMixedDtypes) {
  std::string message = error_of([] { ops::mul(filled({3}), filled({3}, DType::f16)); });
  EXPECT_THAT(message, AllOf(HasSubstr("mul"), HasSubstr("f32[3]"), HasSubstr("f16[3]"),
                             HasSubstr("same dtype")));
}

TEST(OpErrors, DivRejectsIntegers) {
  std::string message =
      error_of([] { ops::div(filled({3}, DType::i32), filled({3}, DType::i32)); });
  EXPECT_THAT(message, AllOf(HasSubstr("div"), HasSubstr("'a'"), HasSubstr("i32[3]")));
}

TEST(OpErrors, MatmulRejectsMismatchedK) {
  std::string message = error_of([] { ops::matmul(filled({2, 3}), filled({4, 5})); });
  EXPECT_THAT(message, AllOf(HasSubstr("matmul"), HasSubstr("K"), HasSubstr("'a'"),
                             HasSubstr("'b'"), HasSubstr("[2, 3]"), HasSubstr("[4, 5]")));
}

TEST(OpErrors, MatmulRejectsMismatchedBatch) {
  std::string message = error_of([] { ops::matmul(filled({2, 3, 4}), filled({3, 4, 5})); });
  EXPECT_THAT(message, AllOf(HasSubstr("matmul"), HasSubstr("batch"), HasSubstr("[2, 3, 4]"),
                             HasSubstr("[3, 4, 5]")));
}

TEST(OpErrors, MatmulRejectsVectors) {
  std::string message = error_of([] { ops::matmul(filled({3}), filled({3, 4})); });
  EXPECT_THAT(message, AllOf(HasSubstr("matmul"), HasSubstr("'a'"), HasSubstr("[3]")));
}

TEST(OpErrors, LinearRejectsWeightOfAnotherInputSize) {
  std::string message = error_of([] { ops::linear(filled({3, 7}), filled({5, 6})); });
  EXPECT_THAT(message, AllOf(HasSubstr("linear"), HasSubstr("'x'"), HasSubstr("'weight'"),
                             HasSubstr("[3, 7]"), HasSubstr("[5, 6]")));
}

TEST(OpErrors, LinearRejectsBiasOfAnotherOutputSize) {
  std::string message = error_of([] { ops::linear(filled({3, 7}), filled({5, 7}), filled({4})); });
  EXPECT_THAT(message, AllOf(HasSubstr("linear"), HasSubstr("'bias'"), HasSubstr("[4]"),
                             HasSubstr("[5, 7]")));
}

TEST(OpErrors, EmbeddingRejectsFloatIds) {
  std::string message = error_of([] { ops::embedding(filled({10, 4}), filled({4})); });
  EXPECT_THAT(message, AllOf(HasSubstr("embedding"), HasSubstr("'ids'"), HasSubstr("f32[4]"),
                             HasSubstr("i32"), HasSubstr("i64")));
}

TEST(OpErrors, EmbeddingRejectsIdsOutsideTheVocabulary) {
  std::string message = error_of([] { ops::embedding(filled({10, 4}), ids({3, 10, 2})); });
  EXPECT_THAT(message, AllOf(HasSubstr("embedding"), HasSubstr("10"), HasSubstr("[0, 10)")));
}

TEST(OpErrors, CatRejectsDifferentRanks) {
  std::string message = error_of([] {
    std::vector<Tensor> tensors = {filled({2, 3}), filled({3})};
    ops::cat(tensors, 0);
  });
  EXPECT_THAT(message, AllOf(HasSubstr("cat"), HasSubstr("tensors[1]"), HasSubstr("[3]"),
                             HasSubstr("[2, 3]"), HasSubstr("rank")));
}

TEST(OpErrors, CatRejectsSizesDifferingOffTheCatDim) {
  std::string message = error_of([] {
    std::vector<Tensor> tensors = {filled({2, 3}), filled({2, 4})};
    ops::cat(tensors, 0);
  });
  EXPECT_THAT(message, AllOf(HasSubstr("cat"), HasSubstr("tensors[1]"), HasSubstr("[2, 4]"),
                             HasSubstr("[2, 3]")));
}

TEST(OpErrors, CatRejectsMixedDtypes) {
  std::string message = error_of([] {
    std::vector<Tensor> tensors = {filled({2, 3}), filled({2, 3}, DType::bf16)};
    ops::cat(tensors, 0);
  });
  EXPECT_THAT(message, AllOf(HasSubstr("cat"), HasSubstr("f32[2, 3]"), HasSubstr("bf16[2, 3]")));
}

TEST(OpErrors, ViewRejectsAWrongElementCount) {
  std::string message = error_of([] { ops::view(filled({2, 3}), {4, 2}); });
  EXPECT_THAT(message, AllOf(HasSubstr("view"), HasSubstr("'x'"), HasSubstr("[4, 2]"),
                             HasSubstr("[2, 3]"), HasSubstr("6")));
}

TEST(OpErrors, ReshapeRejectsAnUninferableSize) {
  std::string message = error_of([] { ops::reshape(filled({2, 3}), {-1, 4}); });
  EXPECT_THAT(message, AllOf(HasSubstr("reshape"), HasSubstr("[-1, 4]"), HasSubstr("[2, 3]")));
}

TEST(OpErrors, ViewRejectsTwoInferredSizes) {
  std::string message = error_of([] { ops::view(filled({2, 3}), {-1, -1}); });
  EXPECT_THAT(message, AllOf(HasSubstr("view"), HasSubstr("-1"), HasSubstr("[-1, -1]")));
}

TEST(OpErrors, ViewRejectsANonContiguousInput) {
  std::string message = error_of([] { ops::view(ops::transpose(filled({2, 3}), 0, 1), {6}); });
  EXPECT_THAT(message, AllOf(HasSubstr("view"), HasSubstr("'x'"), HasSubstr("[3, 2]"),
                             HasSubstr("contiguous"), HasSubstr("reshape")));
}

TEST(OpErrors, SoftmaxRejectsIntegers) {
  std::string message = error_of([] { ops::softmax(filled({3, 4}, DType::i32)); });
  EXPECT_THAT(message, AllOf(HasSubstr("softmax"), HasSubstr("'x'"), HasSubstr("i32[3, 4]"),
                             HasSubstr("float")));
}

TEST(OpErrors, PowScalarRejectsIntegers) {
  std::string message = error_of([] { ops::pow_scalar(filled({5}, DType::i64), 2.0); });
  EXPECT_THAT(message, AllOf(HasSubstr("pow_scalar"), HasSubstr("'x'"), HasSubstr("i64[5]")));
}

TEST(OpErrors, ReductionRejectsAnEmptyLastDim) {
  std::string message = error_of([] { ops::sum(Tensor::empty({3, 0}, DType::f32)); });
  EXPECT_THAT(message,
              AllOf(HasSubstr("sum"), HasSubstr("'x'"), HasSubstr("[3, 0]"), HasSubstr("empty")));
}

TEST(OpErrors, ArgmaxRejectsAScalar) {
  Tensor scalar = filled({1}).view({});
  std::string message = error_of([&] { ops::argmax(scalar); });
  EXPECT_THAT(message, AllOf(HasSubstr("argmax"), HasSubstr("'x'"), HasSubstr("f32[]")));
}

TEST(OpErrors, WhereRejectsAFloatCondition) {
  std::string message = error_of([] { ops::where(filled({3}), filled({3}), filled({3})); });
  EXPECT_THAT(message, AllOf(HasSubstr("where"), HasSubstr("'condition'"), HasSubstr("f32[3]"),
                             HasSubstr("i32")));
}

TEST(OpErrors, WhereRejectsShapesThatDoNotBroadcast) {
  std::string message = error_of([] {
    ops::where(filled({3, 1}, DType::i32), filled({3, 4}), filled({2, 4}));
  });
  EXPECT_THAT(message, AllOf(HasSubstr("where"), HasSubstr("[3, 4]"), HasSubstr("[2, 4]")));
}

TEST(OpErrors, SliceRejectsStepZero) {
  std::string message = error_of([] { ops::slice(filled({3, 4}), 1, 0, 4, 0); });
  EXPECT_THAT(message,
              AllOf(HasSubstr("slice"), HasSubstr("step"), HasSubstr("0"), HasSubstr("[3, 4]")));
}

TEST(OpErrors, SliceRejectsADimOutOfRange) {
  std::string message = error_of([] { ops::slice(filled({3, 4}), 2, 0, 1); });
  EXPECT_THAT(message,
              AllOf(HasSubstr("slice"), HasSubstr("dim 2"), HasSubstr("'x'"), HasSubstr("[3, 4]")));
}

TEST(OpErrors, TransposeRejectsADimOutOfRange) {
  std::string message = error_of([] { ops::transpose(filled({3, 4}), 0, -3); });
  EXPECT_THAT(message, AllOf(HasSubstr("transpose"), HasSubstr("-3"), HasSubstr("[3, 4]")));
}

TEST(OpErrors, UnknownAttributeIsNamedWithTheValidOnes) {
  Tensor x = filled({3});
  std::string message = error_of([&] {
    call_op("add_scalar", std::span(&x, 1), Attributes{{"scalar", 1.5}, {"bogus", int64_t{2}}});
  });
  EXPECT_THAT(message, AllOf(HasSubstr("add_scalar"), HasSubstr("'bogus'"), HasSubstr("scalar")));
}

TEST(OpErrors, MissingRequiredAttributeIsNamed) {
  Tensor x = filled({3});
  std::string message = error_of([&] { call_op("cast", std::span(&x, 1), Attributes{}); });
  EXPECT_THAT(message, AllOf(HasSubstr("cast"), HasSubstr("'dtype'")));
}

TEST(OpErrors, AttributeOfTheWrongTypeNamesTheOp) {
  Tensor x = filled({3, 4});
  std::string message = error_of([&] {
    call_op("transpose", std::span(&x, 1),
            Attributes{{"dim0", std::string("rows")}, {"dim1", int64_t{1}}});
  });
  EXPECT_THAT(message, AllOf(HasSubstr("transpose"), HasSubstr("'dim0'"), HasSubstr("rows")));
}

TEST(OpErrors, WrongInputCountIsNamed) {
  Tensor x = filled({3});
  std::string message = error_of([&] { call_op("add", std::span(&x, 1), Attributes{}); });
  EXPECT_THAT(message, AllOf(HasSubstr("add"), HasSubstr("2"), HasSubstr("got 1")));
}

TEST(OpErrors, UnknownOpListsTheRegisteredOnes) {
  Tensor x = filled({3});
  std::string message = error_of([&] { call_op("no_such_op", std::span(&x, 1), Attributes{}); });
  EXPECT_THAT(message, AllOf(HasSubstr("'no_such_op'"), HasSubstr("matmul")));
}

TEST(OpErrors, RmsNormRejectsAWeightOfAnotherSize) {
  std::string message = error_of([] { ops::rms_norm(filled({3, 8}), filled({7}), 1e-6); });
  EXPECT_THAT(message, AllOf(HasSubstr("rms_norm"), HasSubstr("'weight'"), HasSubstr("[7]"),
                             HasSubstr("[3, 8]")));
}

TEST(OpErrors, FusedAddRmsNormRejectsAResidualOfAnotherShape) {
  std::string message = error_of([] {
    ops::fused_add_rms_norm(filled({3, 8}), filled({2, 8}), filled({8}), 1e-6);
  });
  EXPECT_THAT(message, AllOf(HasSubstr("fused_add_rms_norm"), HasSubstr("'residual'"),
                             HasSubstr("[2, 8]"), HasSubstr("[3, 8]")));
}

TEST(OpErrors, SiluAndMulRejectsAnOddWidth) {
  std::string message = error_of([] { ops::silu_and_mul(filled({3, 7})); });
  EXPECT_THAT(message, AllOf(HasSubstr("silu_and_mul"), HasSubstr("'x'"), HasSubstr("[3, 7]"),
                             HasSubstr("even")));
}

TEST(OpErrors, RotaryEmbeddingRejectsAnOddHeadSize) {
  std::string message = error_of([] {
    ops::rotary_embedding(ids({0, 1}), filled({2, 14}), filled({2, 7}), filled({4, 6}), 7, true);
  });
  EXPECT_THAT(message,
              AllOf(HasSubstr("rotary_embedding"), HasSubstr("head_size"), HasSubstr("7")));
}

TEST(OpErrors, RotaryEmbeddingRejectsATokenCountMismatch) {
  std::string message = error_of([] {
    ops::rotary_embedding(ids({0, 1, 2}), filled({2, 16}), filled({2, 8}), filled({4, 8}), 8, true);
  });
  EXPECT_THAT(message, AllOf(HasSubstr("rotary_embedding"), HasSubstr("'query'"),
                             HasSubstr("[2, 16]"), HasSubstr("'positions'"), HasSubstr("[3]")));
}

}  // namespace
}  // namespace tessera
