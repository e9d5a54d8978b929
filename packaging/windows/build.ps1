# Build kubetray for Windows: the PyInstaller bundle, then the Inno Setup installer.
#   powershell -File packaging\windows\build.ps1 [-Python .venv\Scripts\python.exe]
# Needs MSVC's cl.exe on PATH (a Developer PowerShell, or ilammy/msvc-dev-cmd in CI): build.py
# compiles kubetray-exec.exe from packaging\launcher. Needs Inno Setup 6 (ISCC.exe; preinstalled on GitHub's windows runners, or: choco install innosetup).
# Signing: set KUBETRAY_SIGNTOOL_CERT (a .pfx path) and KUBETRAY_SIGNTOOL_PASSWORD to sign both
# executables and the installer with signtool; without them the build is unsigned and
# SmartScreen warns on first run.
param([string]$Python = ".venv\Scripts\python.exe")
$ErrorActionPreference = "Stop"
$Root = Resolve-Path "$PSScriptRoot\..\.."
Set-Location $Root
& $Python packaging\app_icon.py ico; if ($LASTEXITCODE) { exit $LASTEXITCODE }
& $Python packaging\build.py; if ($LASTEXITCODE) { exit $LASTEXITCODE }
# The version git gave this build (packaging/build.py wrote it into the bundle).
$Version = & $Python packaging\build.py version build\dist\kubetray

function Sign($Path) {
  if ($env:KUBETRAY_SIGNTOOL_CERT) {
    signtool sign /f $env:KUBETRAY_SIGNTOOL_CERT /p $env:KUBETRAY_SIGNTOOL_PASSWORD `
      /fd sha256 /tr http://timestamp.digicert.com /td sha256 $Path
    if ($LASTEXITCODE) { exit $LASTEXITCODE }
  }
}
if (-not $env:KUBETRAY_SIGNTOOL_CERT) { Write-Warning "KUBETRAY_SIGNTOOL_CERT is not set: building UNSIGNED executables" }
Sign "build\dist\kubetray\kubetray.exe"
Sign "build\dist\kubetray\kubetray-exec.exe"

$Iscc = (Get-Command ISCC.exe -ErrorAction SilentlyContinue).Source
if (-not $Iscc) { $Iscc = "${env:ProgramFiles(x86)}\Inno Setup 6\ISCC.exe" }
& $Iscc "/DVersion=$Version" packaging\windows\kubetray.iss; if ($LASTEXITCODE) { exit $LASTEXITCODE }
$Setup = "build\dist\kubetray-$Version-setup.exe"
Sign $Setup
"{0}  {1:N1} MB" -f $Setup, ((Get-Item $Setup).Length / 1MB)
