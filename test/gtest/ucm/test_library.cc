/*
 * Calls made from other objects: a shared library linked to the test binary
 * (loaded at start), a static archive inside the binary, and modules
 * dlopen()ed after the hooks were installed (plain, lazy binding, after a
 * dlclose/dlopen cycle, RTLD_DEEPBIND, and dlopen()ed by a library).  Each
 * object calls munmap, mmap(MAP_FIXED), mremap and madvise through its own
 * GOT; reloc mode must have patched it, bistro mode sees the libc entry.
 */
#include "common/ucm_test.h"
#include "ucm/testlib.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <sys/mman.h>

UCMT_TESTLIB_DECLARE(ucmt_linked_);
UCMT_TESTLIB_DECLARE(ucmt_static_);

namespace {

using namespace ucmt;

struct lib_funcs {
    std::string name;
    void *(*mmap_fn)(void*, size_t, int, int, int, off_t);
    int (*munmap_fn)(void*, size_t);
    void *(*mremap_fn)(void*, size_t, size_t, int, void*);
    int (*madvise_fn)(void*, size_t, int);
    void *(*dlopen_fn)(const char*, int);
    const char *(*name_fn)(void);
};

std::string lib_path(const char *name)
{
    const char *dir = getenv("UCM_GTEST_LIBDIR");

    return std::string((dir != NULL) ? dir : UCMT_LIBDIR) + "/" + name;
}

template <typename T> void lookup(void *handle, const char *sym, T *fn)
{
    *fn = reinterpret_cast<T>(dlsym(handle, sym));
}

bool lib_from_handle(void *handle, lib_funcs *f)
{
    lookup(handle, "ucmt_lib_mmap", &f->mmap_fn);
    lookup(handle, "ucmt_lib_munmap", &f->munmap_fn);
    lookup(handle, "ucmt_lib_mremap", &f->mremap_fn);
    lookup(handle, "ucmt_lib_madvise", &f->madvise_fn);
    lookup(handle, "ucmt_lib_dlopen", &f->dlopen_fn);
    lookup(handle, "ucmt_lib_name", &f->name_fn);
    return f->mmap_fn && f->munmap_fn && f->mremap_fn && f->madvise_fn &&
           f->dlopen_fn && f->name_fn;
}

class Library : public ucmt::test {
protected:
    void TearDown() override
    {
        while (!m_handles.empty()) {
            dlclose(m_handles.back());
            m_handles.pop_back();
        }
        ucmt::test::TearDown();
    }

    void *open(const char *name, int flags)
    {
        void *h = dlopen(lib_path(name).c_str(), flags);
        EXPECT_TRUE(h != NULL) << dlerror();
        if (h != NULL) {
            m_handles.push_back(h);
        }
        return h;
    }

    /* Each call of the library must be reported (oracle) */
    void check_calls(const lib_funcs &f)
    {
        const size_t ps = page_size(), len = 4 * ps;
        char *p;

        SCOPED_TRACE("library " + f.name);
        {
            SCOPED_TRACE("munmap");
            p = (char*)map_anon(len);
            ASSERT_TRUE(p != NULL);
            ASSERT_EQ(4u, oracle::watch(p, len));
            oracle::arm();
            ASSERT_EQ(0, f.munmap_fn(p, len));
            oracle_stats s = oracle::check();
            EXPECT_EQ(4u, s.changed);
            UCMT_EXPECT_COVERED(s);
            oracle::reset();
        }
        {
            SCOPED_TRACE("mmap(MAP_FIXED)");
            p = (char*)map_anon(len);
            ASSERT_TRUE(p != NULL);
            ASSERT_EQ(4u, oracle::watch(p, len));
            oracle::arm();
            ASSERT_EQ((void*)p, f.mmap_fn(p, len, PROT_READ | PROT_WRITE,
                                          MAP_PRIVATE | MAP_ANONYMOUS |
                                                  MAP_FIXED,
                                          -1, 0));
            oracle_stats s = oracle::check();
            EXPECT_EQ(4u, s.changed);
            UCMT_EXPECT_COVERED(s);
            munmap(p, len);
            oracle::reset();
        }
        {
            SCOPED_TRACE("mremap (shrink)");
            p = (char*)map_anon(len);
            ASSERT_TRUE(p != NULL);
            ASSERT_EQ(4u, oracle::watch(p, len));
            oracle::arm();
            ASSERT_EQ((void*)p, f.mremap_fn(p, len, ps, 0, NULL));
            oracle_stats s = oracle::check();
            EXPECT_EQ(3u, s.changed);
            UCMT_EXPECT_COVERED(s);
            munmap(p, ps);
            oracle::reset();
        }
        {
            SCOPED_TRACE("madvise(MADV_DONTNEED)");
            p = (char*)map_anon(len);
            ASSERT_TRUE(p != NULL);
            ASSERT_EQ(4u, oracle::watch(p, len));
            oracle::arm();
            ASSERT_EQ(0, f.madvise_fn(p, len, MADV_DONTNEED));
            oracle_stats s = oracle::check();
            EXPECT_EQ(4u, s.changed);
            UCMT_EXPECT_COVERED(s);
            munmap(p, len);
            oracle::reset();
        }
    }

    void check_module(const char *file, int flags, const char *expect_name)
    {
        lib_funcs f;
        void *h = open(file, flags);

        ASSERT_TRUE(h != NULL);
        ASSERT_TRUE(lib_from_handle(h, &f));
        f.name = f.name_fn();
        ASSERT_EQ(std::string(expect_name), f.name);
        check_calls(f);
    }

    std::vector<void*> m_handles;
};

TEST_F(Library, LinkedAtStart)
{
    lib_funcs f = {"linked", ucmt_linked_mmap, ucmt_linked_munmap,
                   ucmt_linked_mremap, ucmt_linked_madvise,
                   ucmt_linked_dlopen, ucmt_linked_name};
    ASSERT_EQ(std::string("linked"), f.name_fn());
    check_calls(f);
}

TEST_F(Library, StaticArchive)
{
    lib_funcs f = {"static", ucmt_static_mmap, ucmt_static_munmap,
                   ucmt_static_mremap, ucmt_static_madvise,
                   ucmt_static_dlopen, ucmt_static_name};
    ASSERT_EQ(std::string("static"), f.name_fn());
    check_calls(f);
}

TEST_F(Library, DlopenAfterHooks)
{
    check_module("libucmt_dl.so", RTLD_NOW | RTLD_LOCAL, "dl");
}

TEST_F(Library, DlopenLazyBinding)
{
    check_module("libucmt_dl.so", RTLD_LAZY | RTLD_LOCAL, "dl");
}

TEST_F(Library, DlopenAgainAfterDlclose)
{
    void *h = dlopen(lib_path("libucmt_dl.so").c_str(), RTLD_NOW);

    ASSERT_TRUE(h != NULL) << dlerror();
    ASSERT_EQ(0, dlclose(h));
    check_module("libucmt_dl.so", RTLD_NOW | RTLD_LOCAL, "dl");
}

TEST_F(Library, DlopenDeepBind)
{
    check_module("libucmt_deep.so", RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND,
                 "deep");
}

TEST_F(Library, DlopenGlobal)
{
    check_module("libucmt_deep.so", RTLD_NOW | RTLD_GLOBAL, "deep");
}

TEST_F(Library, DlopenedByLibrary)
{
    lib_funcs outer, inner;
    void *h = open("libucmt_dl.so", RTLD_NOW | RTLD_LOCAL);

    ASSERT_TRUE(h != NULL);
    ASSERT_TRUE(lib_from_handle(h, &outer));
    void *h2 = outer.dlopen_fn(lib_path("libucmt_nested.so").c_str(),
                               RTLD_NOW | RTLD_LOCAL);
    ASSERT_TRUE(h2 != NULL) << dlerror();
    m_handles.push_back(h2);
    ASSERT_TRUE(lib_from_handle(h2, &inner));
    inner.name = inner.name_fn();
    ASSERT_EQ(std::string("nested"), inner.name);
    check_calls(inner);
}

TEST_F(Library, DlopenedByLibraryWithDeepBind)
{
    lib_funcs outer, inner;
    void *h = open("libucmt_dl.so", RTLD_LAZY | RTLD_LOCAL);

    ASSERT_TRUE(h != NULL);
    ASSERT_TRUE(lib_from_handle(h, &outer));
    void *h2 = outer.dlopen_fn(lib_path("libucmt_nested.so").c_str(),
                               RTLD_LAZY | RTLD_LOCAL | RTLD_DEEPBIND);
    ASSERT_TRUE(h2 != NULL) << dlerror();
    m_handles.push_back(h2);
    ASSERT_TRUE(lib_from_handle(h2, &inner));
    inner.name = inner.name_fn();
    check_calls(inner);
}

} // namespace
