import { connect } from "node:http2";
import { connect as netConnect } from "node:net";

/**
 * The kubelet's image pull, for tests: one unary gRPC call of the CRI (`runtime.v1.ImageService/
 * PullImage`, k8s.io/cri-api) to containerd's socket, so containerd's CRI plugin pulls in
 * containerd's own process, with its environment, as it does for the kubelet (`ctr images pull`
 * would pull in the ctr client instead). No gRPC library here: the call is HTTP/2 with a
 * 5-byte length prefix, and the request is two nested protobuf strings
 * (PullImageRequest.image = 1: ImageSpec, ImageSpec.image = 1: string).
 */
export async function criPullImage(socket: string, image: string): Promise<{ status: number; message: string }> {
  const field1 = (body: Buffer) => Buffer.concat([Buffer.from([0x0a]), varint(body.length), body]);
  const message = field1(field1(Buffer.from(image)));
  const prefix = Buffer.alloc(5);
  prefix.writeUInt32BE(message.length, 1);
  const session = connect("http://localhost", { createConnection: () => netConnect(socket) });
  try {
    const call = session.request({
      ":method": "POST",
      ":path": "/runtime.v1.ImageService/PullImage",
      "content-type": "application/grpc",
      te: "trailers",
    });
    const answer = new Promise<{ status: number; message: string }>((resolve, reject) => {
      const settle = (headers: Record<string, unknown>) => {
        if (headers["grpc-status"] === undefined) return;
        resolve({
          status: Number(headers["grpc-status"]),
          message: decodeURIComponent(String(headers["grpc-message"] ?? "")),
        });
      };
      // A failed call may answer with headers only ("trailers-only"), else the status is in the trailers.
      call.on("response", settle);
      call.on("trailers", settle);
      call.on("error", reject);
      call.on("end", () => reject(new Error("the CRI call ended without a grpc-status")));
      call.setTimeout(60_000, () => reject(new Error("the CRI call took over 60 s")));
      call.resume();
    });
    call.end(Buffer.concat([prefix, message]));
    return await answer;
  } finally {
    session.destroy();
  }
}

function varint(n: number): Buffer {
  const bytes: number[] = [];
  while (n > 0x7f) {
    bytes.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  bytes.push(n);
  return Buffer.from(bytes);
}
