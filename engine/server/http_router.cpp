#include "engine/server/http_router.h"

#include <fmt/format.h>

#include "engine/server/http_errors.h"

namespace tessera {

HttpRouter& HttpRouter::add(std::string method, std::string path, HttpHandler handler,
                            bool on_pool) {
  routes_.push_back({std::move(method), std::move(path), std::move(handler), on_pool});
  return *this;
}

HttpDispatch HttpRouter::route(const HttpRequest& request) const {
  std::string allowed;
  for (const Route& route : routes_) {
    if (route.path != request.path) continue;
    if (route.method == request.method || (route.method == "GET" && request.method == "HEAD"))
      return {route.handler, route.on_pool};
    allowed +=
        (allowed.empty() ? "" : ", ") + route.method + (route.method == "GET" ? ", HEAD" : "");
  }
  if (allowed.empty())
    return {[](const HttpRequest& request, HttpResponseWriter& writer) {
      send_error(writer,
                 ApiError(404, fmt::format("no route {} {}", request.method, request.path)));
    }};
  return {[allowed](const HttpRequest& request, HttpResponseWriter& writer) {
    send_error(writer,
               ApiError(405, fmt::format("{} is served for {} only, not {}", request.path, allowed,
                                         request.method)),
               {{"Allow", allowed}});
  }};
}

}  // namespace tessera
