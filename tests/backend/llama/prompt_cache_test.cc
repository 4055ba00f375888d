// The host prompt cache's own rules: the longest prefix of the same salt wins, least recently
// used entries go first, an entry that another extends is dropped, and shedding lowers the room.
#include "backend/llama/prompt_cache.h"

#include <gtest/gtest.h>

#include <numeric>

namespace mmserve {
namespace {

std::vector<llama_token> Tokens(int n, int first = 0) {
  std::vector<llama_token> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

PromptCache::Entry Entry(std::vector<llama_token> tokens, std::string salt = "",
                         size_t state_bytes = 1000) {
  return {.tokens = std::move(tokens), .salt = std::move(salt),
          .state = std::vector<uint8_t>(state_bytes, 7)};
}

TEST(PromptCacheTest, FindsTheLongestSharedPrefixOfTheSameSalt) {
  PromptCache cache(1 << 20);
  ASSERT_TRUE(cache.Put(Entry(Tokens(40))));
  auto other = Tokens(40);
  other[20] = 999;  // shares 20
  ASSERT_TRUE(cache.Put(Entry(other)));
  ASSERT_TRUE(cache.Put(Entry(Tokens(60), "tenant-b")));
  const auto prompt = Tokens(50);
  auto hit = cache.Find(prompt, "", 16, prompt.size() - 1);
  ASSERT_TRUE(hit.entry);
  EXPECT_EQ(hit.common, 40u);
  EXPECT_EQ(hit.entry->tokens, Tokens(40));
  // Another salt never sees it; below the least share is no hit; `most` bounds the share.
  EXPECT_EQ(cache.Find(prompt, "tenant-c", 16, 49).entry, nullptr);
  EXPECT_EQ(cache.Find(Tokens(10), "", 16, 9).entry, nullptr);
  EXPECT_EQ(cache.Find(prompt, "tenant-b", 16, 30).common, 30u);
  const auto c = cache.counts();
  EXPECT_EQ(c.lookups, 4);
  EXPECT_EQ(c.hits, 2);
  EXPECT_EQ(c.entries, 3);
}

TEST(PromptCacheTest, DropsTheLeastRecentlyUsedToStayWithinItsLimit) {
  const int64_t one = Entry(Tokens(20)).bytes();
  PromptCache cache(3 * one);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(cache.Put(Entry(Tokens(20, 1000 * i))));
  ASSERT_TRUE(cache.Find(Tokens(20, 0), "", 16, 19).entry);  // the first is used again
  ASSERT_TRUE(cache.Put(Entry(Tokens(20, 5000))));           // the second goes
  EXPECT_EQ(cache.bytes(), 3 * one);
  EXPECT_EQ(cache.counts().evicted, 1);
  EXPECT_TRUE(cache.Find(Tokens(20, 0), "", 16, 19).entry);
  EXPECT_FALSE(cache.Find(Tokens(20, 1000), "", 16, 19).entry);
  EXPECT_TRUE(cache.Find(Tokens(20, 2000), "", 16, 19).entry);
  // One entry larger than the whole cache is not kept, and drops nothing.
  EXPECT_FALSE(cache.Put(Entry(Tokens(20, 9000), "", 4 * static_cast<size_t>(one))));
  EXPECT_EQ(cache.counts().entries, 3);
}

TEST(PromptCacheTest, AnEntryThatExtendsAnotherReplacesItAndACoveredOneIsNotKept) {
  PromptCache cache(1 << 20);
  ASSERT_TRUE(cache.Put(Entry(Tokens(30))));
  ASSERT_TRUE(cache.Put(Entry(Tokens(50))));  // extends the first: it replaces it
  EXPECT_EQ(cache.counts().entries, 1);
  EXPECT_FALSE(cache.Put(Entry(Tokens(40))));  // all its tokens are held already
  ASSERT_TRUE(cache.Put(Entry(Tokens(40), "b")));  // not for another salt
  EXPECT_EQ(cache.counts().entries, 2);
  EXPECT_EQ(cache.bytes(), Entry(Tokens(50)).bytes() + Entry(Tokens(40), "b").bytes());
}

TEST(PromptCacheTest, CoversSaysWhetherAStateOfAPrefixIsHeld) {
  PromptCache cache(1 << 20);
  ASSERT_TRUE(cache.Put(Entry(Tokens(40))));
  EXPECT_TRUE(cache.Covers(Tokens(30), ""));
  EXPECT_TRUE(cache.Covers(Tokens(40), ""));
  EXPECT_FALSE(cache.Covers(Tokens(41), ""));
  EXPECT_FALSE(cache.Covers(Tokens(30), "other"));
}

TEST(PromptCacheTest, SheddingLowersTheLimitAndDropsWhatNoLongerFits) {
  const int64_t one = Entry(Tokens(20)).bytes();
  PromptCache cache(4 * one);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(cache.Put(Entry(Tokens(20, 1000 * i))));
  EXPECT_EQ(cache.Shed(2 * one + 1), 2 * one + 1);
  EXPECT_EQ(cache.limit(), 2 * one - 1);
  EXPECT_EQ(cache.counts().entries, 1);  // the newest
  EXPECT_TRUE(cache.Find(Tokens(20, 3000), "", 16, 19).entry);
  EXPECT_EQ(cache.Shed(int64_t{1} << 40), 2 * one - 1);  // no more than it has
  EXPECT_EQ(cache.limit(), 0);
  EXPECT_EQ(cache.bytes(), 0);
  EXPECT_FALSE(cache.Put(Entry(Tokens(20))));
}

}  // namespace
}  // namespace mmserve
