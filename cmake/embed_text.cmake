# Writes OUTPUT, a header holding INPUT's text as the C++ string constant NAME, so generated code
# can carry source that is also compiled into the library (kernels/scalar_math.inc).
# Run as: cmake -DINPUT=... -DOUTPUT=... -DNAME=... -P embed_text.cmake
file(READ "${INPUT}" text)
file(WRITE "${OUTPUT}"
  "// Generated from ${INPUT} by cmake/embed_text.cmake; edit that file instead.\n"
  "#pragma once\n"
  "inline constexpr const char ${NAME}[] = R\"tessera_embedded(${text})tessera_embedded\";\n")
