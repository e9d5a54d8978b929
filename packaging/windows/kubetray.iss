; Inno Setup 6 script: kubetray for Windows. Build with packaging\windows\build.ps1, which
; passes /DVersion=... and makes build\kubetray.ico first.
;   Program Files\kubetray\kubetray.exe, kubetray-exec.exe (one PyInstaller bundle)
;   a Start-menu entry, optional start at login (the same Run value the app's Settings uses),
;   and the install directory on the user's PATH so a kubeconfig may say kubetray-exec
;   (kubetray setup writes the absolute path anyway).
; Upgrades (written from Inno Setup's and Windows' documentation; NOT RUN HERE, Linux CI only):
;   Windows locks a running program's files, so kubetray cannot be replaced under itself.
;   CloseApplications has the Restart Manager close the running kubetray (app or agent: they
;   stop as on "kubetray stop", logins come back from the Credential Manager), and
;   RestartApplications starts again, with the same arguments, those that registered for it
;   (app\restart_windows.py calls RegisterApplicationRestart at start): once each, since the
;   locked files keep a running kubetray from noticing the new build first (on Linux and macOS
;   it can, so their scripts ask with "restart --if-outdated"). Uninstall asks the
;   running kubetray to stop first (and to remove its start-at-login value), then ends what is
;   left.
#ifndef Version
  #define Version "0.0.0"
#endif

[Setup]
AppId={{6C1F2B7A-4E0B-4C64-9B1E-2F1D6A7C9E31}
AppName=kubetray
AppVersion={#Version}
AppPublisher=kubetray
DefaultDirName={autopf}\kubetray
DefaultGroupName=kubetray
DisableProgramGroupPage=yes
PrivilegesRequired=admin
ArchitecturesAllowed=x64compatible
ArchitecturesInstallIn64BitMode=x64compatible
ChangesEnvironment=yes
CloseApplications=yes
CloseApplicationsFilter=*.exe,*.dll,*.pyd
RestartApplications=yes
OutputDir=..\..\build\dist
OutputBaseFilename=kubetray-{#Version}-setup
SetupIconFile=..\..\build\kubetray.ico
UninstallDisplayIcon={app}\kubetray.exe
Compression=lzma2/max
SolidCompression=yes
WizardStyle=modern
UsedUserAreasWarning=no

[Tasks]
Name: "startatlogin"; Description: "Start kubetray when I log in"; Flags: unchecked

[Files]
Source: "..\..\build\dist\kubetray\*"; DestDir: "{app}"; Flags: ignoreversion recursesubdirs createallsubdirs

[Icons]
Name: "{group}\kubetray"; Filename: "{app}\kubetrayw.exe"
Name: "{group}\Uninstall kubetray"; Filename: "{uninstallexe}"

[Registry]
; Start at login: HKCU\...\Run, value "kubetray" (app\autostart\autostart_windows.py writes the same).
Root: HKCU; Subkey: "Software\Microsoft\Windows\CurrentVersion\Run"; ValueType: string; \
  ValueName: "kubetray"; ValueData: """{app}\kubetrayw.exe"""; Tasks: startatlogin; \
  Flags: uninsdeletevalue
; The helper's directory on the user's PATH (removed again on uninstall, see [Code]).
Root: HKCU; Subkey: "Environment"; ValueType: expandsz; ValueName: "Path"; \
  ValueData: "{olddata};{app}"; Check: NeedsAddPath(ExpandConstant('{app}'))

[Run]
Filename: "{app}\kubetrayw.exe"; Description: "Start kubetray now"; \
  Flags: nowait postinstall skipifsilent runasoriginaluser

[UninstallRun]
Filename: "{app}\kubetray.exe"; Parameters: "stop --remove-autostart"; Flags: runhidden runasoriginaluser; RunOnceId: "StopKubetrayCleanly"
Filename: "taskkill.exe"; Parameters: "/IM kubetrayw.exe /IM kubetray.exe /F"; Flags: runhidden; RunOnceId: "StopKubetray"

[Code]
function NeedsAddPath(Dir: string): Boolean;
var
  Paths: string;
begin
  if not RegQueryStringValue(HKEY_CURRENT_USER, 'Environment', 'Path', Paths) then
    Paths := '';
  Result := Pos(';' + Uppercase(Dir) + ';', ';' + Uppercase(Paths) + ';') = 0;
end;

procedure CurUninstallStepChanged(CurUninstallStep: TUninstallStep);
var
  Paths, Dir: string;
  P: Integer;
begin
  if CurUninstallStep <> usPostUninstall then
    exit;
  if not RegQueryStringValue(HKEY_CURRENT_USER, 'Environment', 'Path', Paths) then
    exit;
  Dir := ExpandConstant('{app}');
  P := Pos(';' + Uppercase(Dir), Uppercase(Paths));
  if P > 0 then
  begin
    Delete(Paths, P, Length(Dir) + 1);
    RegWriteExpandStringValue(HKEY_CURRENT_USER, 'Environment', 'Path', Paths);
  end;
end;
