/* SPDX-License-Identifier: BSD-3-Clause */
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

namespace
{

using namespace ucmt;

struct lib_funcs {
    std::string name;
    void *(*mmap_fn)(void *, size_t, int, int, int, off_t);
    int (*munmap_fn)(void *, size_t);
    void *(*mremap_fn)(void *, size_t, size_t, int, void *);
    int (*madvise_fn)(void *, size_t, int);
    void *(*dlopen_fn)(const char *, int);
    const char *(*name_fn)(void);
    int (*munmap_table_fn)(void *, size_t);
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
    lookup(handle, "ucmt_lib_munmap_via_table", &f->munmap_table_fn);
    return f->mmap_fn && f->munmap_fn && f->mremap_fn && f->madvise_fn &&
           f->dlopen_fn && f->name_fn && f->munmap_table_fn;
}

class Library : public ucmt::test
{
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
            p = (char *)map_anon(len);
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
            p = (char *)map_anon(len);
            ASSERT_TRUE(p != NULL);
            ASSERT_EQ(4u, oracle::watch(p, len));
            oracle::arm();
            ASSERT_EQ((void *)p,
                      f.mmap_fn(p, len, PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
                                0));
            oracle_stats s = oracle::check();
            EXPECT_EQ(4u, s.changed);
            UCMT_EXPECT_COVERED(s);
            munmap(p, len);
            oracle::reset();
        }
        {
            SCOPED_TRACE("mremap (shrink)");
            p = (char *)map_anon(len);
            ASSERT_TRUE(p != NULL);
            ASSERT_EQ(4u, oracle::watch(p, len));
            oracle::arm();
            ASSERT_EQ((void *)p, f.mremap_fn(p, len, ps, 0, NULL));
            oracle_stats s = oracle::check();
            EXPECT_EQ(3u, s.changed);
            UCMT_EXPECT_COVERED(s);
            munmap(p, ps);
            oracle::reset();
        }
        {
            SCOPED_TRACE("madvise(MADV_DONTNEED)");
            p = (char *)map_anon(len);
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

    /* munmap through a pointer in the library's initialized data */
    void check_table_call(const lib_funcs &f)
    {
        const size_t ps = page_size(), len = 4 * ps;
        char *p = (char *)map_anon(len);

        SCOPED_TRACE("library " + f.name + ", munmap via a data pointer");
        ASSERT_TRUE(p != NULL);
        ASSERT_EQ(4u, oracle::watch(p, len));
        oracle::arm();
        ASSERT_EQ(0, f.munmap_table_fn(p, len));
        oracle_stats s = oracle::check();
        EXPECT_EQ(4u, s.changed);
        EXPECT_EQ(0u, s.uncovered)
            << "munmap called through a function pointer that the "
               "dynamic linker stored in initialized data (R_X86_64_64 "
               "relocation) raised no VM_UNMAPPED (reloc mode once "
               "patched only JUMP_SLOT/GLOB_DAT slots): "
            << s.str();
        oracle::reset();
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

    lib_funcs open_module(const char *file, int flags)
    {
        lib_funcs f = lib_funcs();
        void *h     = open(file, flags);

        if ((h != NULL) && lib_from_handle(h, &f)) {
            f.name = f.name_fn();
        }
        return f;
    }

    std::vector<void *> m_handles;
};

TEST_F(Library, LinkedAtStart)
{
    lib_funcs f = {"linked",
                   ucmt_linked_mmap,
                   ucmt_linked_munmap,
                   ucmt_linked_mremap,
                   ucmt_linked_madvise,
                   ucmt_linked_dlopen,
                   ucmt_linked_name,
                   ucmt_linked_munmap_via_table};
    ASSERT_EQ(std::string("linked"), f.name_fn());
    check_calls(f);
}

TEST_F(Library, StaticArchive)
{
    lib_funcs f = {"static",
                   ucmt_static_mmap,
                   ucmt_static_munmap,
                   ucmt_static_mremap,
                   ucmt_static_madvise,
                   ucmt_static_dlopen,
                   ucmt_static_name,
                   ucmt_static_munmap_via_table};
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

TEST_F(Library, LinkedAtStartFunctionPointerInData)
{
    lib_funcs f = lib_funcs();

    f.name            = "linked";
    f.munmap_table_fn = ucmt_linked_munmap_via_table;
    check_table_call(f);
}

TEST_F(Library, StaticArchiveFunctionPointerInData)
{
    lib_funcs f = lib_funcs();

    f.name            = "static";
    f.munmap_table_fn = ucmt_static_munmap_via_table;
    check_table_call(f);
}

TEST_F(Library, DlopenFunctionPointerInData)
{
    lib_funcs f = open_module("libucmt_dl.so", RTLD_NOW | RTLD_LOCAL);

    ASSERT_TRUE(f.munmap_table_fn != NULL);
    check_table_call(f);
}

/* A module's DT_NEEDED dependency is loaded by the same dlopen(): its GOT
 * must be patched too. */
TEST_F(Library, DlopenLoadsDependency)
{
    void *h = open("libucmt_top.so", RTLD_NOW | RTLD_LOCAL);
    int (*via_needed)(void *, size_t);
    lib_funcs needed = lib_funcs();

    ASSERT_TRUE(h != NULL);
    lookup(h, "ucmt_lib_munmap_via_needed", &via_needed);
    lookup(h, "ucmt_needed_mmap", &needed.mmap_fn);
    lookup(h, "ucmt_needed_munmap", &needed.munmap_fn);
    lookup(h, "ucmt_needed_mremap", &needed.mremap_fn);
    lookup(h, "ucmt_needed_madvise", &needed.madvise_fn);
    lookup(h, "ucmt_needed_name", &needed.name_fn);
    ASSERT_TRUE(via_needed && needed.mmap_fn && needed.munmap_fn &&
                needed.mremap_fn && needed.madvise_fn && needed.name_fn);
    needed.name = needed.name_fn();
    ASSERT_EQ(std::string("needed"), needed.name);
    check_calls(needed);

    const size_t ps = page_size();
    char *p         = (char *)map_anon(2 * ps);
    ASSERT_TRUE(p != NULL);
    ASSERT_EQ(2u, oracle::watch(p, 2 * ps));
    oracle::arm();
    ASSERT_EQ(0, via_needed(p, 2 * ps));
    oracle_stats s = oracle::check();
    EXPECT_EQ(2u, s.changed);
    UCMT_EXPECT_COVERED(s);
}

/* dlmopen() into the base namespace loads a library like dlopen() does. */
TEST_F(Library, DlmopenBaseNamespace)
{
    void *h = dlmopen(LM_ID_BASE, lib_path("libucmt_nested.so").c_str(),
                      RTLD_NOW | RTLD_LOCAL);
    lib_funcs f;

    ASSERT_TRUE(h != NULL) << dlerror();
    m_handles.push_back(h);
    ASSERT_TRUE(lib_from_handle(h, &f));
    f.name = f.name_fn();
    SCOPED_TRACE("dlmopen() must be followed like dlopen() in reloc mode");
    check_calls(f);
}

} // namespace
