// The one error type for bad input: a message that names the offending field.
// The command line maps it to exit code 2.
#pragma once

#include <stdexcept>
#include <string>

namespace kgate {

class InputError : public std::runtime_error {
 public:
  InputError(std::string field, const std::string& message)
      : std::runtime_error(field + ": " + message), field_(std::move(field)), message_(message) {}
  const std::string& field() const { return field_; }
  // The message without the field.
  const std::string& message() const { return message_; }

 private:
  std::string field_;
  std::string message_;
};

}  // namespace kgate
