/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A hook test that owns shared files and their mappings: memfds, files in
 * /dev/shm, SysV segments and mappings it made are removed at TearDown
 * (unmapped, detached, IPC_RMID'd, closed, unlinked, in that order).
 */
#ifndef UCMT_FILE_FIXTURE_H_
#define UCMT_FILE_FIXTURE_H_

#include "common/ucm_test.h"

#include <sys/mman.h>
#include <sys/shm.h>
#include <unistd.h>

#include <string>
#include <utility>
#include <vector>

namespace ucmt
{

class file_test : public ucmt::test
{
  protected:
    void TearDown() override
    {
        for (size_t i = 0; i < m_maps.size(); ++i) {
            munmap(m_maps[i].first, m_maps[i].second);
        }
        for (size_t i = 0; i < m_shm.size(); ++i) {
            shmdt(m_shm[i]);
        }
        for (size_t i = 0; i < m_ids.size(); ++i) {
            shmctl(m_ids[i], IPC_RMID, NULL);
        }
        for (size_t i = 0; i < m_fds.size(); ++i) {
            close(m_fds[i]);
        }
        for (size_t i = 0; i < m_paths.size(); ++i) {
            unlink(m_paths[i].c_str());
        }
        ucmt::test::TearDown();
    }

    /* fd (if valid), closed at the end */
    int keep_fd(int fd)
    {
        if (fd >= 0) {
            m_fds.push_back(fd);
        }
        return fd;
    }

    /* a memfd named name of len bytes, closed at the end; -1 on error */
    int memfd(size_t len, const char *name)
    {
        int fd = keep_fd(memfd_create(name, MFD_CLOEXEC));

        return ((fd >= 0) && (ftruncate(fd, (off_t)len) == 0)) ? fd : -1;
    }

    /* a read-write mapping of fd (at 'at' with MAP_FIXED if given),
     * unmapped at the end; NULL on error */
    char *map(int fd, size_t len, int flags = MAP_SHARED, off_t offset = 0,
              void *at = NULL)
    {
        void *p = mmap(at, len, PROT_READ | PROT_WRITE,
                       flags | ((at != NULL) ? MAP_FIXED : 0), fd, offset);

        if (p == MAP_FAILED) {
            return NULL;
        }
        m_maps.push_back(std::make_pair(p, len));
        return (char *)p;
    }

    std::vector<std::pair<void *, size_t>> m_maps;
    std::vector<void *> m_shm;
    std::vector<int> m_ids;
    std::vector<int> m_fds;
    std::vector<std::string> m_paths;
};

} // namespace ucmt

#endif
