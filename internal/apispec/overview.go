package apispec

// overview is the document's description: what every operation has in common.
const overview = `Every method is a POST of a JSON object to {basePath}/{group}/{method}, answered with a JSON
object: the Connect protocol's unary JSON form of the protobuf messages (field names in lower
camel case, enums as their names, 64-bit integers as strings, times in RFC 3339, durations as
"3600s"). The same methods are served at their native paths for Connect, gRPC and gRPC-Web
clients (each operation's x-better-compute-procedure).

Authentication: send an API key as ` + "`Authorization: Bearer bck_…`" + `. JSON calls to every method but the
public ones also send ` + "`X-Better-Compute: 1`" + `, which a browser cannot add across origins unless CORS
allows it.

Errors have a status in the 4xx or 5xx range and the Connect error body; its code is the error's
class, and a google.rpc.BadRequest detail names each field a request got wrong. A JSON request
that names a field its method does not have (a misspelling, or a field of a newer version) is
refused with invalid_argument naming it, rather than run as if the field were absent; binary
protobuf callers stay forward-compatible, their unknown field numbers ignored.

Lists take pageSize and pageToken and answer nextPageToken, empty on the last page. Methods marked
idempotent accept an Idempotency-Key header, so a retry does not act twice. Requests are at most
4 MiB unless the deployment says otherwise.`
