// `ums completion bash|zsh`: a script that completes ums's commands, subcommands and options,
// generated from the commander tree so it never lags behind the commands.

import { Command } from "commander";
import { UsageError } from "../errors.js";

/** "word" → the words that may follow it (subcommands and options), for every command path. */
function table(root: Command): Map<string, string[]> {
  const out = new Map<string, string[]>();
  const walk = (cmd: Command, path: string) => {
    const words = [
      ...cmd.commands.map((c) => c.name()),
      ...cmd.options.flatMap((o) => [o.long, o.short].filter((f): f is string => f !== undefined)),
      "--help",
    ];
    out.set(path, words);
    for (const sub of cmd.commands) walk(sub, path ? `${path} ${sub.name()}` : sub.name());
  };
  walk(root, "");
  return out;
}

function bash(root: Command): string {
  const cases = [...table(root)].map(([path, words]) => `    "${path}") words="${words.join(" ")}" ;;`).join("\n");
  return `# ums completion for bash: eval "$(ums completion bash)" (or save it under bash-completion's dir)
_ums() {
  local cur path="" i w words
  cur="\${COMP_WORDS[COMP_CWORD]}"
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="\${COMP_WORDS[i]}"
    [[ "$w" == -* ]] && continue
    case "\${path:+$path }$w" in
${[...table(root).keys()]
  .filter((p) => p !== "")
  .map((p) => `      "${p}") path="${p}" ;;`)
  .join("\n")}
    esac
  done
  case "$path" in
${cases}
    *) words="" ;;
  esac
  COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -o default -F _ums ums
`;
}

function zsh(root: Command): string {
  return `#compdef ums
# ums completion for zsh: eval "$(ums completion zsh)" (after compinit), or save as _ums in $fpath
${bash(root).replace("complete -o default -F _ums ums", "")}
autoload -U +X bashcompinit && bashcompinit
complete -o default -F _ums ums
`;
}

export function completionCommand(root: () => Command): Command {
  return new Command("completion")
    .description("print a shell completion script (bash or zsh)")
    .argument("<shell>", "bash or zsh")
    .addHelpText("after", '\nExamples:\n  $ eval "$(ums completion bash)"\n  $ ums completion zsh > ~/.zfunc/_ums\n')
    .action((shell: string) => {
      if (shell === "bash") process.stdout.write(bash(root()));
      else if (shell === "zsh") process.stdout.write(zsh(root()));
      else throw new UsageError(`completion for 'bash' or 'zsh', not '${shell}'`);
    });
}
