#!/bin/sh
# Build kubetray.app (menu bar only), kubetray-<version>.dmg and kubetray-<version>.pkg on macOS.
#   packaging/macos/build.sh [PYTHON]         (default: .venv/bin/python)
# NOT RUN HERE (the project's CI is Linux): written from Apple's documentation.
#
# Upgrades: the .pkg (installer, MDM, Homebrew casks) replaces /Applications/kubetray.app and
# its postinstall (scripts/postinstall) asks every user's running kubetray to restart into it;
# dragging a new kubetray.app from the .dmg over the old one works too: the running kubetray
# notices the new build in its bundle and restarts itself once idle (app/upgrade.py).
#
# Signing and notarization are driven by the environment:
#   KUBETRAY_CODESIGN_IDENTITY  "Developer ID Application: Name (TEAMID)": sign the app and dmg
#   KUBETRAY_NOTARY_PROFILE     a notarytool keychain profile (xcrun notarytool
#                               store-credentials): notarize and staple both
# Without them the build is unsigned: Gatekeeper warns on first open, and the keychain asks
# again after every update (an unsigned app has no stable identity to trust).
#
# kubeconfig runs the helper inside the app: /Applications/kubetray.app/Contents/MacOS/kubetray-exec
# (kubetray setup writes that path). For a shell: ln -s that path /usr/local/bin/kubetray-exec
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
python=${1:-$root/.venv/bin/python}
cd "$root"
"$python" packaging/app_icon.py icns
"$python" packaging/build.py
app=build/dist/kubetray.app
version=$("$python" packaging/build.py version "$app")
[ -x "$app/Contents/MacOS/kubetray-exec" ] || { echo "error: $app lacks kubetray-exec" >&2; exit 1; }
/usr/libexec/PlistBuddy -c "Print :LSUIElement" "$app/Contents/Info.plist" | grep -q true

identity=${KUBETRAY_CODESIGN_IDENTITY:-}
if [ -n "$identity" ]; then
  # Inside out: every binary with the hardened runtime, then the app itself.
  find "$app/Contents" -type f \( -name "*.so" -o -name "*.dylib" -o -perm -u+x \) -print0 |
    xargs -0 codesign --force --options runtime --timestamp --sign "$identity"
  codesign --force --options runtime --timestamp --sign "$identity" "$app"
  codesign --verify --strict --verbose=2 "$app"
else
  echo "warning: KUBETRAY_CODESIGN_IDENTITY is not set: building an UNSIGNED app" >&2
  echo "warning: Gatekeeper will warn, and the keychain will prompt after each update" >&2
fi

stage=build/dmg
rm -rf "$stage"
mkdir -p "$stage"
cp -R "$app" "$stage/"
ln -s /Applications "$stage/Applications"
dmg=build/dist/kubetray-$version.dmg
rm -f "$dmg"
hdiutil create -volname "kubetray $version" -srcfolder "$stage" -ov -format UDZO "$dmg" >/dev/null
[ -n "$identity" ] && codesign --force --timestamp --sign "$identity" "$dmg"

profile=${KUBETRAY_NOTARY_PROFILE:-}
if [ -n "$profile" ] && [ -n "$identity" ]; then
  xcrun notarytool submit "$dmg" --keychain-profile "$profile" --wait
  xcrun stapler staple "$dmg"
elif [ -n "$profile" ]; then
  echo "warning: KUBETRAY_NOTARY_PROFILE needs KUBETRAY_CODESIGN_IDENTITY: not notarized" >&2
fi

# The .pkg: the same app, installed in /Applications, with the restart after an upgrade.
pkg=build/dist/kubetray-$version.pkg
pkgbuild --component "$app" --install-location /Applications --identifier io.kubetray.app \
  --version "$version" --scripts packaging/macos/scripts "$pkg.unsigned"
if [ -n "$identity" ]; then
  installer_identity=$(echo "$identity" | sed 's/Developer ID Application/Developer ID Installer/')
  productsign --sign "$installer_identity" "$pkg.unsigned" "$pkg" && rm "$pkg.unsigned"
else
  mv "$pkg.unsigned" "$pkg"
fi
[ -n "$profile" ] && [ -n "$identity" ] && xcrun notarytool submit "$pkg" \
  --keychain-profile "$profile" --wait && xcrun stapler staple "$pkg"
for f in "$dmg" "$pkg"; do
  printf '%-40s %6.1f MB\n' "$f" "$(stat -f %z "$f" | awk '{print $1 / 1000000}')"
done
