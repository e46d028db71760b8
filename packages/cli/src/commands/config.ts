import type { Command } from "commander";
import { checkCaHash, fetchPinnedCa, stagePinnedCa } from "../ca-pin.ts";
import { upsertContext, writeConfig } from "../config-file.ts";
import { CliError, EXIT, usageError } from "../errors.ts";
import { type Column, render } from "../output.ts";
import type { Wrap } from "../program.ts";
import { examples, formatOf, outputOption } from "./common.ts";

/** `keelson login` and `keelson config use-context|get-contexts|set-context|current-context`. */

interface ContextRow {
  current: boolean;
  name: string;
  url: string;
  project: string;
  user: string;
}

const COLUMNS: Column<ContextRow>[] = [
  { header: "CURRENT", value: (c) => (c.current ? "*" : "") },
  { header: "NAME", value: (c) => c.name },
  { header: "URL", value: (c) => c.url },
  { header: "PROJECT", value: (c) => c.project },
  { header: "USER", value: (c) => c.user },
];

interface TokenAnswer {
  token: { expires_at: string; user: { name: string }; project: { id: string; name: string } };
}

export function configCommands(program: Command, wrap: Wrap): void {
  examples(
    program
      .command("login")
      .description("Log in with a user's password (Keystone style) and keep the token in the config file (0600)")
      .requiredOption("--user <name>", "user name")
      .option("--password-stdin", "read the password from stdin instead of a prompt")
      .option("--context-name <name>", "the context to store it in (default: the current one, else `default`)")
      .option(
        "--ca-hash <sha256:hex>",
        "pin the control plane's CA by the hash of its public key (a join token's caCertHash); kept in the context",
      ),
    "keelson login --url http://127.0.0.1:8080 --user alice --project default",
    "keelson login --url https://keelson.example:8443 --ca-hash sha256:5f1c... --user alice",
    'echo "$PASSWORD" | keelson login --url https://keelson.example --ca-file ca.pem --user ci --project ci --password-stdin',
  ).action(
    wrap(async (cli, options) => {
      const o = options as { user: string; passwordStdin?: boolean; contextName?: string; caHash?: string };
      const config = cli.readConfig();
      const current = cli.context(config);
      const url = cli.settings.url ?? current?.url;
      if (!url) throw usageError("login needs --url (or KEELSON_URL)");
      const pin = o.caHash === undefined ? undefined : checkCaHash(o.caHash, url);
      if (pin && cli.settings.caFile)
        throw usageError("give --ca-hash or --ca-file (KEELSON_CA_FILE), not both: one way to trust the control plane");
      const name = o.contextName ?? cli.settings.context ?? config.currentContext ?? "default";
      // The CA is pinned before the password is asked for, let alone sent.
      const pinnedPem = pin ? await fetchPinnedCa(url, pin, cli.settings.requestTimeoutMs) : undefined;
      const project = cli.settings.project ?? (current?.url === url ? current.projectName : undefined) ?? "default";
      const password = o.passwordStdin
        ? (await cli.io.readStdin()).replace(/\r?\n$/, "")
        : await cli.io.promptSecret(`Password for ${o.user}: `);
      if (password === undefined) throw usageError("no terminal to ask the password on: use --password-stdin");
      if (password === "") throw usageError("the password is empty");
      const pinned = pinnedPem ? stagePinnedCa(cli.configPath, name, pinnedPem) : undefined;
      const api = cli.client(
        url,
        undefined,
        pinned ? { name, caFile: pinned.staged } : current?.url === url ? current : undefined,
      );
      try {
        const scope = /^[0-9a-f-]{36}$/i.test(project) ? { id: project } : { name: project, domain: { id: "default" } };
        const res = await api.send("POST", "/keystone/v3/auth/tokens", {
          body: {
            auth: {
              identity: {
                methods: ["password"],
                password: { user: { name: o.user, password, domain: { id: "default" } } },
              },
              scope: { project: scope },
            },
          },
        });
        const token = res.headers.get("x-subject-token");
        const answer = (await res.json()) as TokenAnswer;
        if (!token) throw new CliError("the control plane answered without an X-Subject-Token", EXIT.unreachable);
        pinned?.commit();
        const stored = upsertContext(config, name, {
          url,
          user: answer.token.user.name,
          project: answer.token.project.id,
          projectName: answer.token.project.name,
          token,
          caFile: pinned?.file ?? cli.settings.caFile,
          caHash: pin,
        });
        // Another CA file given now replaces the pinned one: the old pin no longer describes it.
        if (!pin && cli.settings.caFile) delete stored.caHash;
        config.currentContext = name;
        writeConfig(cli.configPath, config);
        cli.out.note(
          `logged in to ${url} as ${answer.token.user.name} in project ${answer.token.project.name}; ` +
            `the token (until ${answer.token.expires_at}) is in context "${name}" of ${cli.configPath}`,
        );
      } finally {
        pinned?.discard();
        await api.close();
      }
    }),
  );

  const config = program.command("config").description("The config file's contexts (control plane, project, token)");

  examples(
    outputOption(config.command("get-contexts").description("List the contexts")),
    "keelson config get-contexts",
  ).action(
    wrap(async (cli, options) => {
      const file = cli.readConfig();
      const rows = file.contexts.map((c) => ({
        current: c.name === file.currentContext,
        name: c.name,
        url: c.url ?? "",
        project: c.projectName ?? c.project ?? "",
        user: c.user ?? "",
      }));
      render(cli.out, formatOf(options as { output: string }), rows, COLUMNS);
    }),
  );

  examples(
    config.command("current-context").description("Print the current context's name"),
    "keelson config current-context",
  ).action(
    wrap(async (cli) => {
      const name = cli.readConfig().currentContext;
      if (!name) throw new CliError("no current context (keelson login or keelson config use-context NAME)");
      cli.out.print(name);
    }),
  );

  examples(
    config.command("use-context").argument("<name>", "context name").description("Make a context the current one"),
    "keelson config use-context staging",
  ).action(
    wrap(async (cli, name) => {
      const file = cli.readConfig();
      if (!file.contexts.some((c) => c.name === name)) {
        throw new CliError(`no context "${String(name)}" in ${cli.configPath} (see keelson config get-contexts)`);
      }
      file.currentContext = name as string;
      writeConfig(cli.configPath, file);
      cli.out.note(`switched to context "${String(name)}"`);
    }),
  );

  examples(
    config
      .command("set-context")
      .argument("<name>", "context name (made if missing)")
      .description("Set fields of a context from --url, --token, --project and --ca-file (the global flags)")
      .option("--use", "also make it the current context"),
    "keelson --url https://keelson.internal --ca-file ca.pem config set-context prod --use",
    "KEELSON_TOKEN=$(cat .keelson/admin-token) keelson --url http://127.0.0.1:8080 config set-context admin",
  ).action(
    wrap(async (cli, name, options) => {
      const file = cli.readConfig();
      const s = cli.settings;
      const project =
        s.project && /^[0-9a-f-]{36}$/i.test(s.project) ? { project: s.project } : { projectName: s.project };
      upsertContext(file, name as string, { url: s.url, token: s.token, caFile: s.caFile, ...project });
      // A project given by name is looked up when the context is used.
      if (project.projectName) upsertContext(file, name as string, { project: project.projectName });
      if ((options as { use?: boolean }).use || !file.currentContext) file.currentContext = name as string;
      writeConfig(cli.configPath, file);
      cli.out.note(`context "${String(name)}" set in ${cli.configPath}`);
    }),
  );
}
