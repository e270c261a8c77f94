// lotus — test helper: append one line to the file named by LOTUS_FAKE_COLLECTOR_LOG
// SPDX-License-Identifier: MIT
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

inline void fake_log(const std::string& line) {
  const char* path = std::getenv("LOTUS_FAKE_COLLECTOR_LOG");
  if (path == nullptr) return;
  const int fd = ::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  const std::string text = line + "\n";
  if (::write(fd, text.data(), text.size()) < 0) {
  }
  ::close(fd);
}
