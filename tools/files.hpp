// The command line's paths: every folder or file a flag names is checked here
// before any work, so that a bad path is one message naming the flag and exit
// code 2, never an uncaught std::filesystem error or a result lost after a
// long run. Each function throws InputError(flag, ...) on a bad path.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace kgate::files {

// An output folder: created (with its parents) when missing; must end up a
// writable folder. Refuses an empty name, a name or component over the
// system's limits, an existing non-folder, a symbolic-link loop and a
// read-only file system.
void output_folder(const std::string& path, const std::string& flag);

// An input folder: must exist, be a folder and be readable.
void input_folder(const std::string& path, const std::string& flag);

// An input file: must exist, be readable and not be a folder.
void input_file(const std::string& path, const std::string& flag);

// A report file (JSON, JUnit) checked before the run that fills it: "-" is
// standard output; an existing regular file, or a missing one, needs a
// writable file (and folder, for the rename); a symbolic link is judged by
// what it points to (a dangling link or a loop is refused); any other
// existing file (a device such as /dev/null, a FIFO) must be writable, and
// a FIFO must have a reader. A file replaced by a rename needs a folder that
// takes a new file (checked by creating and removing one: /proc refuses).
void output_file(const std::string& path, const std::string& flag);

// Writes a report checked by output_file. "-" writes to standard output. A
// regular file (or a missing one) is replaced atomically: a temporary file in
// its folder, then rename. A symbolic link is never replaced: the file it
// points to is written (atomically when that is a regular file). Any other
// existing file (device, FIFO) is written through, never replaced.
void write_output_file(const std::string& path, const std::string& contents, const std::string& flag);

// Output flags that must not name one file (--report and --junit, both "-"):
// pairs of (flag, path), empty paths ignored; two devices that are not
// regular files (e.g. /dev/null) may be shared. InputError naming the later
// flag.
void distinct_outputs(const std::vector<std::pair<std::string, std::string>>& flag_paths);

}  // namespace kgate::files
