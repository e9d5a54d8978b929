#!/bin/sh
# Wrap a built bundle (packaging/build.py) in a .deb and a .tar.gz (with install.sh).
#   packaging/linux/pack.sh BUNDLE [DIST] [PYTHON]
# The version is the one the bundle carries (its kubetray-build.json): the .deb's is the same,
# spelled as dpkg orders it (0.2.1~dev4+g1a2b3c4 sorts before 0.2.1, like pip's .dev4).
# KUBETRAY_DEB_COMPRESSION (xz) and KUBETRAY_PACK (deb tar) let the upgrade tests make their
# throw-away packages in seconds (none, deb).
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
bundle=$(cd "$1" && pwd)
dist=${2:-$root/build/dist}
python=${3:-$root/.venv/bin/python}
mkdir -p "$dist"
dist=$(cd "$dist" && pwd)
cd "$root"
version=$("$python" packaging/build.py version "$bundle")
debversion=$("$python" packaging/build.py version "$bundle" --debian)
arch=$(dpkg --print-architecture 2>/dev/null || uname -m)
glibc=$(ldd --version | head -1 | awk '{print $NF}')
work=$(mktemp -d "${TMPDIR:-/tmp}/kubetray-pack.XXXXXX")
trap 'rm -rf "$work"' EXIT

# -- the .deb: /opt/kubetray, /usr/bin links, desktop entry, icons -------------------------
stage=$work/deb
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
cp packaging/linux/debian/postinst packaging/linux/debian/prerm "$stage/DEBIAN/"
installed=$(du -sk --apparent-size "$stage" | cut -f1)
cat > "$stage/DEBIAN/control" <<CONTROL
Package: kubetray
Version: $debversion
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
deb=$dist/kubetray_${debversion}_${arch}.deb
dpkg-deb --root-owner-group "-Z${KUBETRAY_DEB_COMPRESSION:-xz}" --build "$stage" "$deb" >/dev/null
made=$deb
case " ${KUBETRAY_PACK:-deb tar} " in *" tar "*) ;; *)
  echo "kubetray $version"
  printf '%-60s %6.1f MB\n' "$deb" "$(stat -c %s "$deb" | awk '{print $1 / 1000000}')"
  exit 0 ;;
esac

# -- the .tar.gz: the bundle, the desktop entry, an icon and install.sh -----------------------
tarstage=$work/tar/kubetray-$version
mkdir -p "$tarstage"
cp -a "$bundle" "$tarstage/kubetray"
cp resources/kubetray.desktop resources/icons/kubetray-app.svg "$tarstage/"
cp packaging/linux/install.sh "$tarstage/install.sh"
chmod 755 "$tarstage/install.sh"
tarball=$dist/kubetray-$version-linux-$(uname -m).tar.gz
tar -C "$work/tar" -czf "$tarball" "kubetray-$version"

made="$made $tarball"
echo "kubetray $version, built on glibc $glibc (the oldest glibc these packages run on)"
for f in $made; do
  printf '%-60s %6.1f MB\n' "$f" "$(stat -c %s "$f" | awk '{print $1 / 1000000}')"
done
