#!/usr/bin/env bash
# A checkout of COMMIT at DIR for the benches' `--against DIR` (wake.mjs, fs.mjs), built:
#
#   bench/against-tree.sh DIR COMMIT
#
# A git worktree whose node_modules links to this tree's external packages but whose @ums packages
# are its own: a worktree with this tree's node_modules linked whole would run THIS tree's server,
# agent and protocol (npm links @ums/* to this tree's packages), and every comparison would be of
# a tree with itself. Remove it with `git worktree remove --force DIR`.
set -euo pipefail
if [[ $# -ne 2 ]]; then
  echo "usage: bench/against-tree.sh DIR COMMIT" >&2
  exit 2
fi
dir=$1
commit=$2
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ -e $dir ]]; then
  echo "against-tree: $dir exists; remove it first (git worktree remove --force $dir)" >&2
  exit 1
fi
git -C "$root" worktree add --detach "$dir" "$commit"
mkdir "$dir/node_modules" "$dir/node_modules/@ums"
for entry in "$root"/node_modules/* "$root"/node_modules/.bin; do
  name=$(basename "$entry")
  [[ $name == @ums ]] || ln -s "$entry" "$dir/node_modules/$name"
done
for pkg in "$dir"/packages/*; do
  name=$(basename "$pkg")
  ln -s "../../packages/$name" "$dir/node_modules/@ums/$name"
  if [[ -d $root/packages/$name/node_modules ]]; then ln -s "$root/packages/$name/node_modules" "$pkg/node_modules"; fi
done
cd "$dir"
npx tsc -b
npm run --silent build:agent
echo "built $commit at $dir; its server: $(node -e 'console.log(require("fs").realpathSync("node_modules/@ums/server"))')"
