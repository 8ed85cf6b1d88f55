// The server's routes: method and path to a handler. A path served under another method is a 405
// with the Allow header (HEAD is answered wherever GET is); an unknown path a 404.
#pragma once

#include <string>
#include <vector>

#include "engine/server/http/http_front_end.h"

namespace tessera {

class HttpRouter {
 public:
  // `on_pool`: the handler may block (it runs on the handler pool, not on the event loop).
  HttpRouter& add(std::string method, std::string path, HttpHandler handler, bool on_pool = false);
  HttpDispatch route(const HttpRequest& request) const;

 private:
  struct Route {
    std::string method, path;
    HttpHandler handler;
    bool on_pool;
  };
  std::vector<Route> routes_;
};

}  // namespace tessera
