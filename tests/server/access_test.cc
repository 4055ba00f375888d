#include "server/access.h"

#include <gtest/gtest.h>

namespace mmserve {
namespace {

TEST(AccessTest, NoKeysConfiguredLeavesEveryScopeOpen) {
  Access open;
  EXPECT_TRUE(open.Check(Scope::kInference, "").ok());
  EXPECT_TRUE(open.Check(Scope::kAdmin, "").ok());
}

TEST(AccessTest, MissingKeyIsUnauthenticatedAndWrongKeyIsDenied) {
  Access access("inf", "adm");
  EXPECT_TRUE(access.Check(Scope::kOpen, "").ok());
  EXPECT_EQ(access.Check(Scope::kInference, "").code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(access.Check(Scope::kInference, "Basic aW5m").code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(access.Check(Scope::kInference, "Bearer ").code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(access.Check(Scope::kInference, "Bearer inff").code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(access.Check(Scope::kInference, "Bearer in").code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(access.Check(Scope::kInference, "Bearer inf").ok());
  EXPECT_TRUE(access.Check(Scope::kInference, "bearer  inf ").ok());  // scheme is case-blind
}

TEST(AccessTest, AdminKeyGrantsEverythingAndInferenceKeyNotAdmin) {
  Access access("inf", "adm");
  EXPECT_TRUE(access.Check(Scope::kInference, "Bearer adm").ok());
  EXPECT_TRUE(access.Check(Scope::kAdmin, "Bearer adm").ok());
  EXPECT_EQ(access.Check(Scope::kAdmin, "Bearer inf").code(), StatusCode::kPermissionDenied);
}

TEST(AccessTest, WithoutAnAdminKeyTheApiKeyAdministers) {
  Access access("inf", "");
  EXPECT_TRUE(access.Check(Scope::kAdmin, "Bearer inf").ok());
  EXPECT_EQ(access.Check(Scope::kAdmin, "").code(), StatusCode::kUnauthenticated);
  Access admin_only("", "adm");
  EXPECT_TRUE(admin_only.Check(Scope::kInference, "").ok());
  EXPECT_EQ(admin_only.Check(Scope::kAdmin, "").code(), StatusCode::kUnauthenticated);
}

// The status page asks for a key only where one is needed.
TEST(AccessTest, TellsWhichScopesNeedAKey) {
  EXPECT_FALSE(Access().KeyRequired(Scope::kInference));
  EXPECT_FALSE(Access().KeyRequired(Scope::kAdmin));
  EXPECT_TRUE(Access("inf", "").KeyRequired(Scope::kInference));
  EXPECT_TRUE(Access("inf", "").KeyRequired(Scope::kAdmin));
  EXPECT_FALSE(Access("", "adm").KeyRequired(Scope::kInference));
  EXPECT_TRUE(Access("", "adm").KeyRequired(Scope::kAdmin));
  EXPECT_FALSE(Access("inf", "adm").KeyRequired(Scope::kOpen));
}

}  // namespace
}  // namespace mmserve
