#!/bin/sh
# Build kubetray for Linux: the PyInstaller bundle, a .deb and a .tar.gz (with install.sh).
#   packaging/linux/build.sh [PYTHON]      (default: .venv/bin/python)
# Output in build/dist/: kubetray_<version>_<arch>.deb, kubetray-<version>-linux-<arch>.tar.gz
# The bundle needs the glibc it was built against or newer: build on the oldest distribution
# you support (the CI workflow uses Ubuntu 22.04, glibc 2.35).
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
python=${1:-$root/.venv/bin/python}
cd "$root"
"$python" packaging/build.py
version=$("$python" -c 'import tomllib; print(tomllib.load(open("pyproject.toml","rb"))["project"]["version"])')
arch=$(dpkg --print-architecture 2>/dev/null || uname -m)
glibc=$(ldd --version | head -1 | awk '{print $NF}')
dist=build/dist
bundle=$dist/kubetray

# -- the .deb: /opt/kubetray, /usr/bin links, desktop entry, icons -------------------------
stage=build/deb
rm -rf "$stage"
mkdir -p "$stage/DEBIAN" "$stage/opt" "$stage/usr/bin" "$stage/usr/share/applications" \
  "$stage/usr/share/doc/kubetray"
cp -a "$bundle" "$stage/opt/kubetray"
ln -s /opt/kubetray/kubetray "$stage/usr/bin/kubetray"
ln -s /opt/kubetray/kubetray-exec "$stage/usr/bin/kubetray-exec"
sed 's|^Exec=kubetray$|Exec=/usr/bin/kubetray|' resources/kubetray.desktop \
  > "$stage/usr/share/applications/kubetray.desktop"
for px in 22 32 64; do
  mkdir -p "$stage/usr/share/icons/hicolor/${px}x${px}/apps"
  cp "resources/icons/kubetray-app-$px.png" \
    "$stage/usr/share/icons/hicolor/${px}x${px}/apps/kubetray.png"
done
mkdir -p "$stage/usr/share/icons/hicolor/scalable/apps"
cp resources/icons/kubetray-app.svg "$stage/usr/share/icons/hicolor/scalable/apps/kubetray.svg"
printf 'kubetray %s\nBundles Python %s, Qt (PySide6, LGPLv3) and their libraries.\n' \
  "$version" "$("$python" -c 'import platform; print(platform.python_version())')" \
  > "$stage/usr/share/doc/kubetray/copyright"
installed=$(du -sk --apparent-size "$stage" | cut -f1)
cat > "$stage/DEBIAN/control" <<CONTROL
Package: kubetray
Version: $version
Architecture: $arch
Maintainer: kubetray developers <dev@kubetray.invalid>
Installed-Size: $installed
Section: admin
Priority: optional
Depends: libc6 (>= $glibc), libstdc++6, zlib1g, libexpat1, libglib2.0-0, libdbus-1-3, libfontconfig1, libfreetype6, libx11-6, libx11-xcb1, libxcb1, libxcb-cursor0, libxcb-icccm4, libxcb-image0, libxcb-keysyms1, libxcb-randr0, libxcb-render-util0, libxcb-shape0, libxcb-xfixes0, libxcb-xkb1, libxkbcommon0, libxkbcommon-x11-0, libegl1, libgl1, libwayland-client0, libwayland-cursor0, libwayland-egl1
Recommends: gnome-keyring | kwalletmanager | keepassxc
Homepage: https://github.com/kubetray/kubetray
Description: log in to Kubernetes clusters from your desktop
 A tray app (and a headless agent) that does the OpenID Connect logins for
 kubectl, refreshes tokens ahead of expiry and keeps every secret in the OS
 keyring; kubetray-exec is the exec credential plugin kubeconfig names.
CONTROL
deb=$dist/kubetray_${version}_${arch}.deb
dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >/dev/null

# -- the .tar.gz: the bundle, the desktop entry, an icon and install.sh -----------------------
tarstage=build/tar/kubetray-$version
rm -rf build/tar
mkdir -p "$tarstage"
cp -a "$bundle" "$tarstage/kubetray"
cp resources/kubetray.desktop resources/icons/kubetray-app.svg "$tarstage/"
cp packaging/linux/install.sh "$tarstage/install.sh"
chmod 755 "$tarstage/install.sh"
tarball=$dist/kubetray-$version-linux-$(uname -m).tar.gz
tar -C build/tar -czf "$tarball" "kubetray-$version"

echo "built on glibc $glibc (the oldest glibc these packages run on)"
for f in "$deb" "$tarball"; do
  printf '%-60s %6.1f MB\n' "$f" "$(stat -c %s "$f" | awk '{print $1 / 1000000}')"
done
