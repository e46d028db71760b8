import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** A CA and a server certificate for 127.0.0.1 (or `subjectAltName`), made by openssl in `dir`. */
export function makePki(
  dir: string,
  name: string,
  subjectAltName = "IP:127.0.0.1",
): { caPem: string; key: string; cert: string } {
  const p = (f: string) => join(dir, `${name}-${f}`);
  const run = (...args: string[]) => execFileSync("openssl", args, { stdio: "pipe" });
  run("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", p("ca.key"));
  run("req", "-x509", "-new", "-key", p("ca.key"), "-subj", `/CN=${name}-ca`, "-days", "2", "-out", p("ca.crt"));
  run("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", p("srv.key"));
  run("req", "-new", "-key", p("srv.key"), "-subj", "/CN=127.0.0.1", "-out", p("srv.csr"));
  writeFileSync(p("ext"), `subjectAltName=${subjectAltName}\nbasicConstraints=CA:FALSE\n`);
  run(
    "x509",
    "-req",
    "-in",
    p("srv.csr"),
    "-CA",
    p("ca.crt"),
    "-CAkey",
    p("ca.key"),
    "-CAcreateserial",
    "-days",
    "1",
    "-extfile",
    p("ext"),
    "-out",
    p("srv.crt"),
  );
  return {
    caPem: readFileSync(p("ca.crt"), "utf8"),
    key: readFileSync(p("srv.key"), "utf8"),
    cert: readFileSync(p("srv.crt"), "utf8"),
  };
}
