// Clang's thread-safety annotations (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html):
// which mutex guards a member, which a function needs held. Clang with -Wthread-safety checks
// them (scripts/test.sh builds the unit tests that way); other compilers ignore them.
#pragma once

#if defined(__clang__)
#define MMS_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define MMS_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) MMS_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY MMS_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) MMS_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) MMS_THREAD_ANNOTATION(pt_guarded_by(x))
#define REQUIRES(...) MMS_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define REQUIRES_SHARED(...) MMS_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
#define ACQUIRE(...) MMS_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define ACQUIRE_SHARED(...) MMS_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define RELEASE(...) MMS_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define RELEASE_SHARED(...) MMS_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#define RELEASE_GENERIC(...) MMS_THREAD_ANNOTATION(release_generic_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) MMS_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define EXCLUDES(...) MMS_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define NO_THREAD_SAFETY_ANALYSIS MMS_THREAD_ANNOTATION(no_thread_safety_analysis)
