// The front end's request parser alone (engine/server/http/http_request_parser.h): requests fed a
// byte at a time, pipelined requests, chunked bodies, 100-continue, keep-alive by version, and the
// refusals RFC 9112 asks for. tests/serving/test_hostile_clients.cpp drives it through the server.
#include <gtest/gtest.h>

#include "engine/server/api_key_check.h"
#include "engine/server/http/http_request_parser.h"

using namespace tessera;
using State = HttpRequestParser::State;
using namespace std::string_literals;

namespace {

HttpLimits small_limits() {
  HttpLimits limits;
  limits.max_head_bytes = 256;
  limits.max_headers = 4;
  limits.max_body_bytes = 64;
  return limits;
}

TEST(HttpRequestParser, ARequestFedAByteAtATimeIsParsedOnce) {
  HttpRequestParser parser(small_limits());
  const std::string text = "POST /v1/x?y=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello";
  for (size_t i = 0; i + 1 < text.size(); ++i)
    ASSERT_EQ(parser.feed(text.substr(i, 1)), State::need_more) << i;
  ASSERT_EQ(parser.feed(text.substr(text.size() - 1)), State::complete);
  HttpRequest request = parser.take_request();
  EXPECT_EQ(request.method, "POST");
  EXPECT_EQ(request.path, "/v1/x");
  EXPECT_EQ(request.target, "/v1/x?y=1");
  EXPECT_EQ(request.body, "hello");
  EXPECT_TRUE(request.keep_alive);
  EXPECT_EQ(*request.header("content-length"), "5");
  EXPECT_FALSE(parser.started());
}

// Line breaks in a body that arrives with its head are the body's: pretty-printed JSON.
TEST(HttpRequestParser, ABodyThatComesWithItsHeadMayHoldAnyLineBreaks) {
  const std::string body = "{\n  \"a\": 1,\r  \"b\": 2\n}";
  const std::string text =
      "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
      body;
  HttpRequestParser whole(small_limits());
  ASSERT_EQ(whole.feed(text), State::complete);
  EXPECT_EQ(whole.take_request().body, body);
  HttpRequestParser split(small_limits());  // the head and the body's first line in one read
  ASSERT_EQ(split.feed(text.substr(0, text.size() - 8)), State::need_more);
  ASSERT_EQ(split.feed(text.substr(text.size() - 8)), State::complete);
  EXPECT_EQ(split.take_request().body, body);
  HttpRequestParser bare(small_limits());  // in the head, a bare LF is still refused
  EXPECT_EQ(bare.feed("POST / HTTP/1.1\nHost: h\r\n\r\n"), State::failed);
}

TEST(HttpRequestParser, PipelinedRequestsComeOutInOrder) {
  HttpRequestParser parser(small_limits());
  ASSERT_EQ(parser.feed("GET /a HTTP/1.1\r\nHost: h\r\n\r\nGET /b HTTP/1.1\r\nHost: h\r\n"
                        "Connection: close\r\n\r\nGET /c"),
            State::complete);
  EXPECT_EQ(parser.take_request().path, "/a");
  ASSERT_EQ(parser.state(), State::complete);
  HttpRequest second = parser.take_request();
  EXPECT_EQ(second.path, "/b");
  EXPECT_FALSE(second.keep_alive);
  EXPECT_EQ(parser.state(), State::need_more);
  EXPECT_TRUE(parser.started());
}

TEST(HttpRequestParser, ChunkedBodiesAreDecoded) {
  HttpRequestParser parser(small_limits());
  const std::string text =
      "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: Chunked\r\n\r\n"
      "3;name=value\r\nabc\r\nA\r\n0123456789\r\n0\r\nTrailer: 1\r\n\r\n";
  for (char c : text) parser.feed(std::string(1, c));
  ASSERT_EQ(parser.state(), State::complete);
  EXPECT_EQ(parser.take_request().body, "abc0123456789");
}

TEST(HttpRequestParser, ExpectContinueIsAskedOnceAfterTheHead) {
  HttpRequestParser parser(small_limits());
  parser.feed("POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-Continue\r\nContent-Length: 2\r\n\r\n");
  EXPECT_TRUE(parser.head_complete());
  EXPECT_TRUE(parser.take_continue_request());
  EXPECT_FALSE(parser.take_continue_request());
  EXPECT_EQ(parser.feed("ok"), State::complete);
}

TEST(HttpRequestParser, Http10KeepsAliveOnlyWhenAsked) {
  HttpRequestParser parser(small_limits());
  parser.feed("GET / HTTP/1.0\r\n\r\n");
  EXPECT_FALSE(parser.take_request().keep_alive);
  parser.feed("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
  EXPECT_TRUE(parser.take_request().keep_alive);
}

TEST(HttpRequestParser, AmbiguousOrOversizedRequestsAreRefused) {
  struct Case {
    std::string text;
    int status;
  };
  const std::vector<Case> cases = {
      {"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1, 2\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: +1\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: -5\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 99999999999999999999\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 65\r\n\r\n", 413},
      {"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
       400},
      {"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501},
      {"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", 400},
      {"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400},
      {"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n41\r\n", 413},
      {"POST / HTTP/1.1\r\nHost: h\r\nContent-Encoding: br\r\n\r\n", 415},
      {"POST / HTTP/1.1\r\nHost: h\r\nExpect: magic\r\n\r\n", 417},
      {"GET / HTTP/1.1\r\nHost: h\r\nX: " + std::string(300, 'a') + "\r\n\r\n", 431},
      {"GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 1\r\nC: 1\r\nD: 1\r\n\r\n", 431},
      {"GET / HTTP/1.1\r\nHost: h\r\nX: a\x01z\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nHost: h\r\nX: a\0z\r\n\r\n"s, 400},
      {"GET / HTTP/1.1\r\n\r\n", 400},
      {"GET  / HTTP/1.1\r\nHost: h\r\n\r\n", 400},
      {"GET http://a/ HTTP/1.1\r\nHost: h\r\n\r\n", 400},
      {"GET / HTTP/1.1\rHost: h\r\n\r\n", 400},
      {"GET / HTTP/3.0\r\nHost: h\r\n\r\n", 505},
      {"G(T / HTTP/1.1\r\nHost: h\r\n\r\n", 400},
  };
  for (const Case& c : cases) {
    HttpRequestParser parser(small_limits());
    EXPECT_EQ(parser.feed(c.text), State::failed) << c.text;
    EXPECT_EQ(parser.error().status, c.status) << c.text << ": " << parser.error().message;
    EXPECT_FALSE(parser.error().message.empty());
  }
}

TEST(ApiKeyCheck, TheWholeCredentialIsCompared) {
  auto request = [](std::vector<std::string> values) {
    HttpRequest result;
    for (std::string& value : values) result.headers.emplace_back("authorization", value);
    return result;
  };
  EXPECT_FALSE(check_api_key(request({"Bearer key"}), "key"));
  EXPECT_FALSE(check_api_key(request({"bEaReR key"}), "key"));
  EXPECT_EQ(check_api_key(request({std::string("Bearer key\0junk", 15)}), "key")->status, 401);
  EXPECT_EQ(check_api_key(request({"Bearer ke"}), "key")->status, 401);
  EXPECT_EQ(check_api_key(request({"Bearerkey"}), "key")->status, 401);
  EXPECT_EQ(check_api_key(request({}), "key")->status, 401);
  EXPECT_EQ(check_api_key(request({"Bearer key", "Bearer key"}), "key")->status, 400);
  EXPECT_TRUE(constant_time_equal("abc", "abc"));
  EXPECT_FALSE(constant_time_equal("abc", "abd"));
  EXPECT_FALSE(constant_time_equal("abc", std::string("abc\0", 4)));
}

}  // namespace
