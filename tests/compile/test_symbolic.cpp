// SymInt canonical forms, evaluation, printing, and guard-free decisions.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compile/ir/guards.h"
#include "compile/ir/symbolic.h"
#include "runtime/check.h"

using namespace tessera;
using ::testing::HasSubstr;

TEST(Symbolic, CanonicalFormIsIndependentOfConstructionOrder) {
  SymInt s0 = SymInt::symbol("s0"), s1 = SymInt::symbol("s1");
  EXPECT_TRUE((s0 * 4096).same_as(SymInt(4096) * s0));
  EXPECT_TRUE((s0 + s1 + 3).same_as(SymInt(1) + s1 + 2 + s0));
  EXPECT_TRUE(((s0 + 1) * (s0 - 1)).same_as(s0 * s0 - 1));
  EXPECT_TRUE((s0 * s1 - s1 * s0).is_constant());
  EXPECT_EQ((s0 * s1 - s1 * s0).constant(), 0);
  EXPECT_EQ((s0 * 4096).str(), "4096*s0");
  EXPECT_EQ((s0 * 2 + s1 - 1).str(), "2*s0 + s1 - 1");
  EXPECT_EQ((SymInt(0) - s0).str(), "-s0");
}

TEST(Symbolic, DivisionAndModuloSimplifyWhenExact) {
  SymInt s0 = SymInt::symbol("s0");
  EXPECT_TRUE(floordiv(s0 * 512, 64).same_as(s0 * 8));
  EXPECT_TRUE(mod(s0 * 512, 64).is_constant());
  EXPECT_EQ(floordiv(s0 + 1, 2).str(), "(s0 + 1)//2");
  EXPECT_EQ(mod(s0, 8).str(), "(s0)%8");
  EXPECT_TRUE(floordiv(s0, s0).same_as(1));
  EXPECT_EQ(floordiv(SymInt(-7), 2).constant(), -4);  // floor, as Python
  EXPECT_EQ(mod(SymInt(-7), 2).constant(), 1);
}

TEST(Symbolic, MinMaxUseThatSizesAreNonNegative) {
  SymInt s0 = SymInt::symbol("s0"), s1 = SymInt::symbol("s1");
  EXPECT_TRUE(sym_min(0, s0).same_as(0));
  EXPECT_TRUE(sym_max(s0 + 3, s0).same_as(s0 + 3));
  EXPECT_TRUE(sym_min(s0, s1).same_as(sym_min(s1, s0)));
  EXPECT_EQ(sym_min(s0, s1).evaluate({{"s0", 5}, {"s1", 3}}), 3);
  EXPECT_EQ(sym_max(s0, s1).evaluate({{"s0", 5}, {"s1", 3}}), 5);
}

TEST(Symbolic, EvaluatesUnderBindings) {
  SymInt s0 = SymInt::symbol("s0"), s1 = SymInt::symbol("s1");
  SymInt expr = floordiv(s0 * 3 + s1, 4) + mod(s1, 3) * s0;
  EXPECT_EQ(expr.evaluate({{"s0", 7}, {"s1", 5}}), (7 * 3 + 5) / 4 + (5 % 3) * 7);
  EXPECT_EQ(expr.symbols(), (std::vector<std::string>{"s0", "s1"}));
  try {
    expr.evaluate({{"s0", 1}});
    FAIL() << "expected an error for the unbound s1";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("s1"));
  }
}

TEST(Symbolic, ComparisonsDecideStaticallyWhenTheyCan) {
  SymInt s0 = SymInt::symbol("s0");
  EXPECT_EQ((s0 + 1 > s0).static_value(), 1);
  EXPECT_EQ((s0 == s0 * 1).static_value(), 1);
  EXPECT_EQ((s0 >= 0).static_value(), 1);
  EXPECT_EQ((s0 < 0).static_value(), 0);
  EXPECT_EQ((s0 > 16).static_value(), -1);
  EXPECT_EQ((SymInt(3) < 4).static_value(), 1);
}

TEST(Symbolic, UndecidableConditionOutsideTracingIsAnError) {
  SymInt s0 = SymInt::symbol("s0");
  EXPECT_THROW((void)static_cast<bool>(s0 > 16), Error);
  EXPECT_THROW((void)s0.guard_int(), Error);
}

TEST(Symbolic, ShapeEnvRecordsGuardsWithTheCallersLocation) {
  ShapeEnv env;
  SymInt s0 = env.create_symbol(32);
  ShapeEnvScope scope(env);
  bool big = static_cast<bool>(s0 > 16);  // this line is the guard's location
  int line = __LINE__ - 1;
  EXPECT_TRUE(big);
  ASSERT_EQ(env.guards().size(), 1u);
  EXPECT_EQ(env.guards()[0].condition.str(), "s0 > 16");
  EXPECT_THAT(env.guards()[0].where, HasSubstr(fmt::format("test_symbolic.cpp:{}", line)));
  EXPECT_FALSE(static_cast<bool>(s0 < 8));
  ASSERT_EQ(env.guards().size(), 2u);
  EXPECT_EQ(env.guards()[1].condition.str(), "s0 >= 8");  // recorded as what held
  EXPECT_EQ(s0.guard_int(), 32);
  EXPECT_EQ(env.guards().back().condition.str(), "s0 == 32");
  EXPECT_EQ(first_failing_guard(env.guards(), {{"s0", 32}}), nullptr);
  const Guard* failed = first_failing_guard(env.guards(), {{"s0", 12}});
  ASSERT_NE(failed, nullptr);
  EXPECT_EQ(failed->condition.str(), "s0 > 16");
}
