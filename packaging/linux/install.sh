#!/bin/sh
# Install kubetray from this tarball, for distributions without dpkg.
#   ./install.sh              as root: /opt/kubetray, links in /usr/local/bin
#                             as a user: ~/.local/opt/kubetray, links in ~/.local/bin
#   ./install.sh --uninstall  remove what install.sh put there (settings and keyring kept)
# kubeconfig should name the helper by absolute path: <bin>/kubetray-exec (kubetray setup
# writes it for you). Over an earlier install, a running kubetray restarts into this one once no
# login is in flight (it would notice by itself within seconds; this makes it now, and says so;
# one that already restarted into it by itself is left alone).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
if [ "$(id -u)" = 0 ]; then
  opt=/opt/kubetray bin=/usr/local/bin share=/usr/local/share everyone=--all-users
else
  opt=$HOME/.local/opt/kubetray bin=$HOME/.local/bin share=${XDG_DATA_HOME:-$HOME/.local/share}
  everyone=
fi
if [ "${1:-}" = "--uninstall" ]; then
  # Running instances stop first (told why), and a start-at-login entry for this one goes.
  [ -x "$opt/kubetray" ] && "$opt/kubetray" stop $everyone --remove-autostart || true
  rm -f "$bin/kubetray" "$bin/kubetray-exec" "$share/applications/kubetray.desktop" \
    "$share/icons/hicolor/scalable/apps/kubetray.svg"
  rm -rf "$opt"
  echo "removed kubetray from $opt (your settings and keyring entries are kept)"
  exit 0
fi
# Qt's X11 plugin needs these system libraries; say which are missing instead of failing later.
missing=$(LD_LIBRARY_PATH="$here/kubetray/_internal" ldd \
  "$here/kubetray/_internal/PySide6/Qt/plugins/platforms/libqxcb.so" 2>/dev/null \
  | awk '/not found/ {print $1}' | tr '\n' ' ')
[ -n "$missing" ] && echo "warning: the tray app needs these libraries: $missing" >&2
upgrade=
[ -x "$opt/kubetray" ] && upgrade=1
rm -rf "$opt.new" "$opt.old"
mkdir -p "$(dirname "$opt")" "$bin" "$share/applications" "$share/icons/hicolor/scalable/apps"
cp -a "$here/kubetray" "$opt.new"
# The old files go aside, then away: a running kubetray keeps what it loaded open (app/frozen.py)
# and restarts into the new files.
[ -e "$opt" ] && mv "$opt" "$opt.old"
mv "$opt.new" "$opt"
rm -rf "$opt.old"
ln -sf "$opt/kubetray" "$bin/kubetray"
ln -sf "$opt/kubetray-exec" "$bin/kubetray-exec"
sed "s|^Exec=kubetray\$|Exec=$opt/kubetray|" "$here/kubetray.desktop" \
  > "$share/applications/kubetray.desktop"
cp "$here/kubetray-app.svg" "$share/icons/hicolor/scalable/apps/kubetray.svg"
echo "installed kubetray $("$opt/kubetray" --version | cut -d' ' -f2-) in $opt; kubeconfig's exec command: $opt/kubetray-exec"
[ -n "$upgrade" ] && { "$opt/kubetray" restart $everyone --if-outdated || true; }
case ":$PATH:" in *":$bin:"*) ;; *) echo "add $bin to your PATH to run kubetray" ;; esac
